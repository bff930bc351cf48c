package reliability

import (
	"fmt"
	"os"
)

// runChild runs the helper process named by mode and returns its exit code.
func runChild(mode string) int {
	switch mode {
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, mode)
		return 2
	}
}
