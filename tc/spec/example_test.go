package spec_test

import (
	"errors"
	"fmt"

	"github.com/wanlab/wanlab/tc/spec"
)

func ExampleParse() {
	s, err := spec.Parse("netem delay 100ms 10ms 25% loss 0.3% | tbf rate 0.5mbit burst 5kb latency 70ms peakrate 1mbit minburst 1540")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s)
	tbf := s.Stages[1].(*spec.TBF)
	fmt.Println("tbf limit from latency:", tbf.Limit)
	// Output:
	// delay 100ms 10ms 25% loss 0.3% | tbf rate 500kbit burst 5kb latency 70ms peakrate 1mbit mtu 1540b
	// tbf limit from latency: 9495b
}

func ExampleParse_error() {
	_, err := spec.Parse("dela 100ms")
	fmt.Println(err)
	var pe *spec.ParseError
	if errors.As(err, &pe) {
		fmt.Printf("token %q at %d\n", pe.Token, pe.Pos)
	}
	// Output:
	// unknown keyword "dela" at position 1
	// token "dela" at 1
}

func ExampleParseDirectional() {
	iface, s, err := spec.ParseDirectional("to-client=delay 50ms loss gemodel 1% 30%")
	fmt.Println(iface, "|", s, "|", err)
	// Output:
	// to-client | delay 50ms loss gemodel 1% 30% | <nil>
}
