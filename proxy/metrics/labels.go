package metrics

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
)

// reserved are the label names the proxy's own metrics carry; a constant
// label of the same name would make every scrape fail.
var reserved = map[string]bool{ifaceLabel: true, classLabel: true, "reason": true, "le": true, "quantile": true}

// ParseLabels reads "NAME=VALUE[,NAME=VALUE]..." (the --label flag,
// repeatable, so values holds one or more such lists) into the constant
// labels of every metric: lab=berlin,link=r1-r2. Names follow Prometheus'
// rules (letters, digits, '_', not starting with a digit or "__"), may
// not repeat and may not be one of the proxy's own label names; values
// may be any UTF-8 without ','.
func ParseLabels(values []string) (prometheus.Labels, error) {
	labels := prometheus.Labels{}
	for _, v := range values {
		for _, kv := range strings.Split(v, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			name, value, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("label %q: want NAME=VALUE", kv)
			}
			if !model.LabelName(name).IsValidLegacy() || strings.HasPrefix(name, "__") {
				return nil, fmt.Errorf("label %q: %q is not a Prometheus label name (letters, digits and '_', not starting with a digit or \"__\")", kv, name)
			}
			if reserved[name] {
				return nil, fmt.Errorf("label %q: %q is a label of the proxy's own metrics", kv, name)
			}
			if _, dup := labels[name]; dup {
				return nil, fmt.Errorf("label %q: %s given twice", kv, name)
			}
			if !model.LabelValue(value).IsValid() {
				return nil, fmt.Errorf("label %q: the value is not valid UTF-8", kv)
			}
			labels[name] = value
		}
	}
	if len(labels) == 0 {
		return nil, nil
	}
	return labels, nil
}
