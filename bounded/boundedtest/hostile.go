// Package boundedtest holds the hostile documents every door of the tuner is
// tested with.
package boundedtest

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
)

// Hostile returns the documents of issue 29 that once took gigabytes
// before an error, by name: "deep-100k" (a flow sequence nested 100,000
// deep, 200 KB), "deep-32k" (32,000 deep, 64 KB), "string-50mb" (one 50 MB
// string value) and "alias-bomb" (nine levels of ten aliases each, 10^9
// nodes expanded, under 1 KB). Tests of every door feed them in.
func Hostile() map[string][]byte {
	deep := func(n int) []byte {
		return append(bytes.Repeat([]byte("["), n), bytes.Repeat([]byte("]"), n)...)
	}
	big := make([]byte, 0, 50<<20+16)
	big = append(big, "name: \""...)
	big = append(big, bytes.Repeat([]byte("x"), 50<<20)...)
	big = append(big, "\"\n"...)
	var bomb strings.Builder
	bomb.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				bomb.WriteString(", ")
			}
			fmt.Fprintf(&bomb, "*a%d", i-1)
		}
		bomb.WriteString("]\n")
	}
	return map[string][]byte{
		"deep-100k":   deep(100000),
		"deep-32k":    deep(32000),
		"string-50mb": big,
		"alias-bomb":  []byte(bomb.String()),
	}
}

// Allocated is what f allocates (runtime.MemStats.TotalAlloc, freed or
// not, so it bounds the peak too): the measure of issue 29's "< 64 MB
// extra", which a test asserts in place of a time.
func Allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}
