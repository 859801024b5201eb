package pkg

import (
	"os/exec"
	"testing"
)

var debianPairs = []struct {
	a, b string
	want int
}{
	{"1.0", "1.0", 0},
	{"1.0", "1.0-0", 0},
	{"0:1.0", "1.0", 0},
	{"1.0", "1.1", -1},
	{"1.10", "1.9", 1},
	{"1.0~rc1", "1.0", -1},
	{"1.0", "1.0+b1", -1},
	{"1:0.1", "9.9", 1},
	{"1.6-2.1+deb12u1", "1.6-2.1+deb12u3", -1},
	{"5.02-1+b1", "5.02-1", 1},
	{"1.0a", "1.0", 1},
	{"1.0-1~bpo12+1", "1.0-1", -1},
	{"2.0", "10.0", -1},
	{"1.001", "1.1", 0},
	{"1.0.", "1.0", 1},
}

func TestCompareDebian(t *testing.T) {
	t.Parallel()
	for _, p := range debianPairs {
		if got := CompareDebian(p.a, p.b); got != p.want {
			t.Errorf("CompareDebian(%q, %q) = %d, want %d", p.a, p.b, got, p.want)
		}
		if got := CompareDebian(p.b, p.a); got != -p.want {
			t.Errorf("CompareDebian(%q, %q) = %d, want %d", p.b, p.a, got, -p.want)
		}
	}
}

// TestCompareDebianAgreesWithDpkg holds the table to the real dpkg.
func TestCompareDebianAgreesWithDpkg(t *testing.T) {
	t.Parallel()
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("dpkg is not installed")
	}
	for _, p := range debianPairs {
		for op, want := range map[string]bool{"lt": p.want < 0, "eq": p.want == 0, "gt": p.want > 0} {
			err := exec.Command(dpkg, "--compare-versions", p.a, op, p.b).Run()
			if (err == nil) != want {
				t.Errorf("dpkg --compare-versions %s %s %s: %v, our table says %d", p.a, op, p.b, err, p.want)
			}
		}
	}
}

func TestCompareRPM(t *testing.T) {
	t.Parallel()
	// From rpm's own rpmvercmp test suite (tests/rpmvercmp.at).
	for _, p := range []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0}, {"1.0", "2.0", -1}, {"2.0.1", "2.0.1", 0}, {"2.0", "2.0.1", -1},
		{"2.0.1a", "2.0.1", 1}, {"5.5p1", "5.5p2", -1}, {"5.5p10", "5.5p1", 1}, {"10xyz", "10.1xyz", -1},
		{"xyz10", "xyz10.1", -1}, {"xyz.4", "8", -1}, {"a", "1", -1}, {"1.0010", "1.9", 1},
		{"1.05", "1.5", 0}, {"1.0~rc1", "1.0", -1}, {"1.0~rc1", "1.0~rc2", -1}, {"1.0^", "1.0", 1},
		{"1.0^git1", "1.0^git2", -1}, {"1.0^git1", "1.01", -1}, {"1.0^20160101", "1.0.1", -1},
		{"1.0~rc1^git1", "1.0~rc1", 1}, {"6.0.rc1", "6.0", 1}, {"9.el9", "9.el9_5", -1},
	} {
		if got := CompareRPM(p.a, p.b); got != p.want {
			t.Errorf("CompareRPM(%q, %q) = %d, want %d", p.a, p.b, got, p.want)
		}
		if got := CompareRPM(p.b, p.a); got != -p.want {
			t.Errorf("CompareRPM(%q, %q) = %d, want %d", p.b, p.a, got, -p.want)
		}
	}
	for _, p := range []struct {
		a, b string
		want int
	}{
		{"1:1.0-1", "2.0-1", 1}, {"0:1.0-1", "1.0-1", 0}, {"1.0-1", "1.0-2", -1}, {"1.0", "1.0-2", 0},
	} {
		if got := CompareEVR(p.a, p.b); got != p.want {
			t.Errorf("CompareEVR(%q, %q) = %d, want %d", p.a, p.b, got, p.want)
		}
	}
}
