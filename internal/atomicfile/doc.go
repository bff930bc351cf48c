// Package atomicfile writes a file whole or not at all: through a temporary
// file in the same directory, flushed to disk and renamed over the target,
// so that a reader, a failed write or a crash leaves the old file or the new
// one, never a part of it. Charts and exports the CLI writes, the eval's
// ground-truth cache and a worker's kept results use it. Written here (one
// function) because the standard library has none and the modules that do
// it would add a dependency for these few lines.
package atomicfile
