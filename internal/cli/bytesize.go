package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag of a size in bytes: a whole number of bytes, or a
// number with a unit, decimal (kB, KB, MB, GB, TB) or binary (KiB, MiB,
// GiB, TiB); "B" alone is bytes. Not negative.
type byteSize int64

// byteUnits are the units byteSize reads, longest first.
var byteUnits = []struct {
	name string
	mult float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	num, mult := s, 1.0
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.name); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return fmt.Errorf("%q is not a size: want bytes, or a number with a unit (500MB, 10GiB)", s)
	}
	v *= mult
	if v < 0 || math.IsNaN(v) || v > math.MaxInt64 {
		return fmt.Errorf("%q is out of range: want 0 to 8 EiB", s)
	}
	*b = byteSize(v)
	return nil
}

func (b *byteSize) String() string {
	v := int64(*b)
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.mult && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(v, 10)
}
