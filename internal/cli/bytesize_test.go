package cli

import "testing"

// A size flag reads bytes and decimal or binary units, prints the largest
// whole binary unit, and refuses what is not a size with a message saying
// what is wanted.
func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "10GiB": 10 << 30, "500MB": 500e6, "1.5 KiB": 1536, "2kB": 2000, "7B": 7, "1TiB": 1 << 40,
	} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, int64(b), err, want)
		}
	}
	for in, want := range map[byteSize]string{0: "0", 10 << 30: "10GiB", 1536: "1536", 3 << 20: "3MiB"} {
		if got := in.String(); got != want {
			t.Errorf("String(%d) = %q, want %q", int64(in), got, want)
		}
	}
	for _, in := range []string{"", "GiB", "ten", "-1", "1PB", "9999999TiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, int64(b))
		}
	}
}
