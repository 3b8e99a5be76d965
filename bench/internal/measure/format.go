package measure

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Millis is d in milliseconds, "—" when negative (not seen).
func Millis(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

// MiB is b bytes in MiB.
func MiB(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// Median is v's median, 0 when v is empty.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// OrDash is s, or "—" when it is empty.
func OrDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// ShortDuration is d, in whole minutes when it is ("5m").
func ShortDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// Human is a byte count in B, kB, MB or GB (powers of 1000, as network traffic is counted).
func Human(v float64) string {
	switch a := max(v, -v); {
	case a >= 1e9:
		return fmt.Sprintf("%.2f GB", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2f MB", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1f kB", v/1e3)
	}
	return fmt.Sprintf("%.0f B", v)
}

// Ratio is a/b to three decimals, "—" unless b is positive.
func Ratio(a, b float64) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f", a/b)
}

// Shares is m's values as percentages of total, in the order of their keys: "a 70.0%, b 30.0%".
func Shares[V int | float64](m map[string]V, total V) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", k, 100*float64(m[k])/float64(total)))
	}
	return strings.Join(parts, ", ")
}
