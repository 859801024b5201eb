package pkg

import (
	"strconv"
	"strings"
)

// CompareDebian orders two Debian versions ("[epoch:]upstream[-revision]")
// as dpkg --compare-versions does: <0 when a is older, 0 when equal, >0
// when newer. A missing epoch is 0; "~" sorts before anything, even the
// end of the string.
func CompareDebian(a, b string) int {
	ae, au, ar := splitDebian(a)
	be, bu, br := splitDebian(b)
	if ae != be {
		if ae < be {
			return -1
		}
		return 1
	}
	if c := verrevcmp(au, bu); c != 0 {
		return sign(c)
	}
	return sign(verrevcmp(ar, br))
}

func splitDebian(v string) (epoch int, upstream, revision string) {
	if e, rest, ok := strings.Cut(v, ":"); ok {
		if n, err := strconv.Atoi(e); err == nil {
			epoch, v = n, rest
		}
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// debOrder is dpkg's character weight: letters before other symbols, "~"
// before everything, the end of the string (0) between "~" and letters.
func debOrder(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	c := s[i]
	switch {
	case isDigit(c):
		return 0
	case isAlpha(c):
		return int(c)
	case c == '~':
		return -1
	default:
		return int(c) + 256
	}
}

// verrevcmp is dpkg's comparison of one version part.
func verrevcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		for (i < len(a) && !isDigit(a[i])) || (j < len(b) && !isDigit(b[j])) {
			ac, bc := debOrder(a, i), debOrder(b, j)
			if ac != bc {
				return ac - bc
			}
			i++
			j++
		}
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		firstDiff := 0
		for i < len(a) && isDigit(a[i]) && j < len(b) && isDigit(b[j]) {
			if firstDiff == 0 {
				firstDiff = int(a[i]) - int(b[j])
			}
			i++
			j++
		}
		if i < len(a) && isDigit(a[i]) {
			return 1
		}
		if j < len(b) && isDigit(b[j]) {
			return -1
		}
		if firstDiff != 0 {
			return firstDiff
		}
	}
	return 0
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// CompareEVR orders two rpm "[epoch:]version[-release]" strings as rpm
// does: epoch (missing is 0), then version, then release, each with
// CompareRPM. When either has no release, releases are not compared.
func CompareEVR(a, b string) int {
	ae, av, ar := splitEVR(a)
	be, bv, br := splitEVR(b)
	if c := CompareRPM(ae, be); c != 0 {
		return c
	}
	if c := CompareRPM(av, bv); c != 0 {
		return c
	}
	if ar == "" || br == "" {
		return 0
	}
	return CompareRPM(ar, br)
}

func splitEVR(v string) (epoch, version, release string) {
	epoch = "0"
	if e, rest, ok := strings.Cut(v, ":"); ok {
		epoch, v = e, rest
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// CompareRPM is rpmvercmp: versions split into runs of digits and of
// letters (other characters separate them); digit runs compare as numbers
// and beat letter runs; "~" sorts before anything and "^" after the end
// but before any further run.
func CompareRPM(a, b string) int {
	if a == b {
		return 0
	}
	sep := func(c byte) bool { return !isDigit(c) && !isAlpha(c) && c != '~' && c != '^' }
	for len(a) > 0 || len(b) > 0 {
		for len(a) > 0 && sep(a[0]) {
			a = a[1:]
		}
		for len(b) > 0 && sep(b[0]) {
			b = b[1:]
		}
		at, bt := strings.HasPrefix(a, "~"), strings.HasPrefix(b, "~")
		if at || bt {
			if !at {
				return 1
			}
			if !bt {
				return -1
			}
			a, b = a[1:], b[1:]
			continue
		}
		ac, bc := strings.HasPrefix(a, "^"), strings.HasPrefix(b, "^")
		if ac || bc {
			switch {
			case a == "":
				return -1
			case b == "":
				return 1
			case !ac:
				return 1
			case !bc:
				return -1
			}
			a, b = a[1:], b[1:]
			continue
		}
		if a == "" || b == "" {
			break
		}
		num := isDigit(a[0])
		class := isAlpha
		if num {
			class = isDigit
		}
		i := 0
		for i < len(a) && class(a[i]) {
			i++
		}
		j := 0
		for j < len(b) && class(b[j]) {
			j++
		}
		sa, sb := a[:i], b[:j]
		a, b = a[i:], b[j:]
		if sb == "" {
			// Different classes: a number is newer than letters.
			if num {
				return 1
			}
			return -1
		}
		if num {
			sa, sb = strings.TrimLeft(sa, "0"), strings.TrimLeft(sb, "0")
			if len(sa) != len(sb) {
				return sign(len(sa) - len(sb))
			}
		}
		if c := strings.Compare(sa, sb); c != 0 {
			return c
		}
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}
