package eval

import "errors"

// ErrConfig reports an invalid benchmark configuration.
var ErrConfig = errors.New("eval: invalid config")

// ErrStaleCache reports a ground-truth cache whose key does not match the
// current simulator, space or scenario.
var ErrStaleCache = errors.New("eval: ground-truth cache is stale")
