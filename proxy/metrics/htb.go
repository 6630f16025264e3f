package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/engine"
)

// The htb tree's own counters, per class of the tree, inner
// classes included (their bytes are their leaves').
var (
	htbSentBytes     = desc("htb_sent_bytes_total", "IP bytes sent by an htb class (inner classes count their leaves').", ifaceLabel, classLabel)
	htbBorrowedBytes = desc("htb_borrowed_bytes_total", "IP bytes an htb class sent above its rate, on an ancestor's spare tokens.", ifaceLabel, classLabel)
	htbLentBytes     = desc("htb_lent_bytes_total", "IP bytes descendants of an htb class sent on its tokens while over their own rate.", ifaceLabel, classLabel)
	htbQueuePackets  = desc("htb_queue_packets", "Packets waiting in an htb class's leaves for their turn.", ifaceLabel, classLabel)
	htbDescs         = []*prometheus.Desc{htbSentBytes, htbBorrowedBytes, htbLentBytes, htbQueuePackets}
)

// collectHTB emits the htb counters of d, when it runs a tree.
func collectHTB(ch chan<- prometheus.Metric, d control.Direction) {
	stats := d.Engine.Scheduler
	if stats == nil {
		return
	}
	if len(stats) > MaxClasses {
		kept := make([]engine.TreeClass, MaxClasses)
		copy(kept, stats[:MaxClasses-1])
		rest := &kept[MaxClasses-1]
		rest.ID = otherClass
		for _, s := range stats[MaxClasses-1:] {
			rest.Bytes += s.Bytes
			rest.BorrowedBytes += s.BorrowedBytes
			rest.LentBytes += s.LentBytes
			rest.QueuePackets += s.QueuePackets
		}
		stats = kept
	}
	for _, s := range stats {
		l := []string{d.Iface, s.ID}
		ch <- prometheus.MustNewConstMetric(htbSentBytes, prometheus.CounterValue, float64(s.Bytes), l...)
		ch <- prometheus.MustNewConstMetric(htbBorrowedBytes, prometheus.CounterValue, float64(s.BorrowedBytes), l...)
		ch <- prometheus.MustNewConstMetric(htbLentBytes, prometheus.CounterValue, float64(s.LentBytes), l...)
		ch <- prometheus.MustNewConstMetric(htbQueuePackets, prometheus.GaugeValue, float64(s.QueuePackets), l...)
	}
}
