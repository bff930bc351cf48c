package service

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// Event is one Server-Sent Event of job progress: what the CLI's progress
// line shows, with the job and its state.
type Event struct {
	Job      string         `json:"job"`
	State    store.JobState `json:"state"`
	Study    string         `json:"study,omitempty"`
	Run      string         `json:"run,omitempty"` // a bench job's benchmark run
	Phase    string         `json:"phase,omitempty"`
	Done     int            `json:"done"`
	Total    int            `json:"total"`
	ElapsedS float64        `json:"elapsed_s"`
	ETAS     *float64       `json:"eta_s,omitempty"` // nil: unknown
	Best     *float64       `json:"best,omitempty"`  // nil: nothing SLO-feasible yet
	BestUnit string         `json:"best_unit,omitempty"`
	Front    int            `json:"front"`
	Last     string         `json:"last,omitempty"`
	Running  string         `json:"running,omitempty"`
	Line     string         `json:"line,omitempty"` // the CLI's progress line
	Error    string         `json:"error,omitempty"`
	// Schedule is the schedule whose firing the event reports (Line says
	// what it did; Job is the job it queued, if any).
	Schedule string `json:"schedule,omitempty"`

	data []byte // the event as JSON, encoded once for every client
}

// statusEvent turns the loop's status into an event.
func statusEvent(job, study string, s tuner.Status) Event {
	e := Event{Job: job, State: store.JobRunning, Study: study, Phase: string(s.Phase), Done: s.Done, Total: s.Total,
		ElapsedS: s.Elapsed.Seconds(), BestUnit: s.BestUnit, Front: s.FrontSize, Last: s.Last, Running: s.Running, Line: s.Line()}
	if s.ETA >= 0 {
		v := s.ETA.Seconds()
		e.ETAS = &v
	}
	if !math.IsNaN(s.Best) {
		v := s.Best
		e.Best = &v
	}
	return e
}

// hub fans events out to the SSE clients. A slow client loses older
// events rather than slowing the job: publish never blocks, and when a
// client's buffer is full the oldest event makes room for the newest (the
// figures are cumulative, and a job's final state is never the one lost).
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]struct{}
	// The latest progress and the latest state-only event of each job,
	// replayed to new clients so they start from the current picture.
	progress, state map[string]Event
	order           []string // jobs in the order first seen
}

func newHub() *hub {
	return &hub{subs: map[chan Event]struct{}{}, progress: map[string]Event{}, state: map[string]Event{}}
}

func (h *hub) publish(e Event) {
	e.data, _ = json.Marshal(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	key := e.Job
	if key == "" { // a firing that queued nothing
		key = "schedule/" + e.Schedule
	}
	if _, ok := h.progress[key]; !ok {
		if _, ok := h.state[key]; !ok {
			h.order = append(h.order, key)
		}
	}
	if e.Phase != "" {
		h.progress[key] = e
	} else {
		h.state[key] = e
	}
	for c := range h.subs {
		select {
		case c <- e:
		default:
			select {
			case <-c: // drop the oldest
			default:
			}
			select {
			case c <- e:
			default:
			}
		}
	}
}

func (h *hub) subscribe() (chan Event, []Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := make(chan Event, 256)
	h.subs[c] = struct{}{}
	var snap []Event
	for _, job := range h.order {
		if e, ok := h.progress[job]; ok {
			snap = append(snap, e)
		}
		if e, ok := h.state[job]; ok {
			snap = append(snap, e)
		}
	}
	return c, snap
}

func (h *hub) unsubscribe(c chan Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, c)
}

// events streams job progress as Server-Sent Events ("event: progress",
// data: an Event as JSON), starting with the latest event of each job.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	c, snap := s.hub.subscribe()
	defer s.hub.unsubscribe(c)
	send := func(e Event) bool {
		if _, err := fmt.Fprintf(w, "event: progress\ndata: %s\n\n", e.data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for _, e := range snap {
		if !send(e) {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-c:
			if !send(e) {
				return
			}
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
