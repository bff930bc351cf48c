package sim

// liveReq is the HTTP server's side of a request (see server.go).
type liveReq struct{}
