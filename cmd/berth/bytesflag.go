package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// bytesFlag takes a size as a plain number (50000000000, 50e9) or with a
// unit (50GB, 46.5GiB, 200M): checkpoint sizes are written all three ways.
type bytesFlag struct{ v *int64 }

var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1},
}

func (b bytesFlag) String() string {
	if b.v == nil {
		return "0"
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b bytesFlag) Set(s string) error {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f*mult > 1<<62 {
		return fmt.Errorf("%q: expected a size such as 50e9, 50GB or 46.5GiB", s)
	}
	*b.v = int64(f * mult)
	return nil
}

func (b bytesFlag) Type() string { return "bytes" }
