package store

import (
	"context"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// DB is tuner's database: every study, trial, front, surrogate model, job
// and benchmark run. It is the one interface every door uses (the CLI, the
// service, the workers); store/boltstore (one bbolt file) and store/pgstore
// (a PostgreSQL database shared by several machines) implement all of it,
// and store/storetest is the conformance suite both pass. store/dbopen
// opens one from a file path or a postgres:// URL.
//
// Errors match the sentinels of this package (ErrNotFound, ErrState,
// ErrClaimed, ErrLeaseLost, ErrTrialBudget, ErrWorkerName, ErrStudyLocked,
// ErrRunState, ErrExists, ErrReadOnly, ErrClosed, ErrBusy, ErrConnect,
// ErrNoAnswer, ...) with errors.Is. Methods are safe for concurrent use.
type DB interface {
	// Path names the database for messages: the file's absolute path, or
	// the URL without its password.
	Path() string
	// ReadOnly reports whether the database was opened for reading only
	// (every write fails with ErrReadOnly).
	ReadOnly() bool
	// Close releases the handle (a bbolt writer session, a connection pool).
	Close() error
	// Migrate applies pending schema migrations and returns the schema
	// version (opening for writing migrates a bbolt file already).
	Migrate(ctx context.Context) (int, error)
	// Check verifies the database's invariants (records decode, indexes and
	// fronts agree with the trials); problems are listed in the report.
	Check(ctx context.Context) (CheckReport, error)
	// Backup writes a consistent copy of the database as a new bbolt file
	// at dst (a bbolt source replaces dst atomically; a PostgreSQL one
	// refuses a dst that exists).
	Backup(ctx context.Context, dst string) error

	// EnsureStudy returns the study of key (normalised first: default
	// objectives, canonical SLO), creating it when new.
	EnsureStudy(ctx context.Context, key StudyKey) (Study, error)
	// Study returns a study by ID (ErrNotFound).
	Study(ctx context.Context, id string) (Study, error)
	// Studies lists every study, oldest first.
	Studies(ctx context.Context) ([]Study, error)
	// LockStudy takes the one-search-per-study lock of a search that owns
	// its study alone (a held lock: ErrStudyLocked; StudyLock.Stale names a
	// previous owner that died holding it).
	LockStudy(ctx context.Context, studyID string) (*StudyLock, error)
	// ImportStudy stores a study with its finished trials (a copy from
	// another database): ErrExists when the study has trials here already.
	// The fronts are updated once for the whole import.
	ImportStudy(ctx context.Context, st Study, trials []Trial) error

	// BeginTrial records a trial in state running (before its engine
	// starts) and returns it numbered.
	BeginTrial(ctx context.Context, studyID string, cfg spaces.Config, o BeginOptions) (Trial, error)
	// FinishTrial records how a running trial ended (its state is
	// StateOf(res)) and updates the fronts, in one transaction; ErrState
	// unless the trial is running.
	FinishTrial(ctx context.Context, id string, res *trial.Result) (Trial, error)
	// SetNotes replaces a trial's notes.
	SetNotes(ctx context.Context, id, notes string) error
	// Trial returns one trial by ID (ErrNotFound).
	Trial(ctx context.Context, id string) (Trial, error)
	// Trials returns a study's trials in sequence order.
	Trials(ctx context.Context, studyID string, f TrialFilter) ([]Trial, error)
	// Summaries returns the compact summaries of a study's trials in
	// sequence order: what tables, fronts and recommendations read (a
	// fraction of a full record's size and decoding time).
	Summaries(ctx context.Context, studyID string, f TrialFilter) ([]Summary, error)

	// JoinStudy registers worker as live in a shared study for lease
	// (renewed by Heartbeat) and records spec as the study's spec unless
	// one is recorded. A live worker of that name: ErrWorkerName.
	// Membership.Others counts the other workers that are live or hold an
	// unexpired trial lease.
	JoinStudy(ctx context.Context, studyID, worker string, lease time.Duration, spec []byte) (Membership, error)
	// LeaveStudy removes the worker from the study's live workers.
	LeaveStudy(ctx context.Context, studyID, worker string) error
	// StudySpec returns the spec the study's first worker recorded
	// (ErrNotFound when none did).
	StudySpec(ctx context.Context, studyID string) ([]byte, error)
	// ClaimTrial begins a trial of cfg leased to o.Worker for o.Lease, or
	// fails with ErrClaimed (the config and repeat index run or ran
	// elsewhere) or ErrTrialBudget (o.MaxSearch search trials taken).
	ClaimTrial(ctx context.Context, studyID string, cfg spaces.Config, o ClaimOptions) (Trial, error)
	// Heartbeat renews the worker's membership and, when trialID is set,
	// that trial's lease; ErrLeaseLost when it was taken back.
	Heartbeat(ctx context.Context, studyID, worker, trialID string, lease time.Duration) error
	// ReapExpired marks interrupted the running trials of the study whose
	// lease expired, and returns them. Time a database server was down
	// does not count: after its restart a lease holds for its length again.
	ReapExpired(ctx context.Context, studyID string) ([]Trial, error)

	// Front returns a study's front under q (the maintained one for the
	// zero query, else computed from the summaries).
	Front(ctx context.Context, studyID string, q FrontQuery) (Front, error)
	// GroupFront is Front across the studies of a model and GPU setup.
	GroupFront(ctx context.Context, g Group, q FrontQuery) (Front, error)
	// RebuildFront recomputes and stores a study's maintained front.
	RebuildFront(ctx context.Context, studyID string) (Front, error)
	// RebuildGroupFront recomputes and stores a group's maintained front.
	RebuildGroupFront(ctx context.Context, g Group) (Front, error)
	// History returns the summaries of the trials of one model and GPU
	// across studies, oldest first.
	History(ctx context.Context, q HistoryQuery) ([]Summary, error)
	// HistoryTrials is History with the full records.
	HistoryTrials(ctx context.Context, q HistoryQuery) ([]Trial, error)

	// PutModel stores a surrogate model file under name (replacing one).
	PutModel(ctx context.Context, name string, data []byte, meta ModelMeta) error
	// GetModel returns a stored model file and its metadata (ErrNotFound).
	GetModel(ctx context.Context, name string) ([]byte, ModelMeta, error)
	// ListModels lists the stored models' metadata by name.
	ListModels(ctx context.Context) ([]ModelMeta, error)
	// DeleteModel removes a stored model (ErrNotFound).
	DeleteModel(ctx context.Context, name string) error

	// AddJob stores a new job (numbered "job-N") and returns it.
	AddJob(ctx context.Context, j Job) (Job, error)
	// UpdateJob replaces a stored job.
	UpdateJob(ctx context.Context, j Job) error
	// Jobs lists the jobs, oldest first.
	Jobs(ctx context.Context) ([]Job, error)
	// Job returns one job (ErrNotFound).
	Job(ctx context.Context, id string) (Job, error)
	// ImportJob stores a job copied from another database as given, under
	// its own ID (ErrExists when the ID is taken here); AddJob numbers
	// after it.
	ImportJob(ctx context.Context, j Job) error

	// AddSchedule stores a new schedule (numbered "sched-N") and returns
	// it; a name in use: ErrExists.
	AddSchedule(ctx context.Context, s Schedule) (Schedule, error)
	// UpdateSchedule stores an edit of a schedule (EditSchedule: its
	// definition, paused state and next fire time over the stored fire
	// record) and returns it; ErrNotFound, or ErrExists for a name in use.
	UpdateSchedule(ctx context.Context, s Schedule) (Schedule, error)
	// DeleteSchedule removes a schedule and its history (ErrNotFound); the
	// jobs it queued stay.
	DeleteSchedule(ctx context.Context, id string) error
	// Schedule returns one schedule (ErrNotFound).
	Schedule(ctx context.Context, id string) (Schedule, error)
	// Schedules lists the schedules, oldest first.
	Schedules(ctx context.Context) ([]Schedule, error)
	// FireSchedule records a firing of schedule id for slot f.Slot, which
	// must be its next fire time (else ErrClaimed and nothing is written:
	// another service fired it, or it was paused or edited meanwhile),
	// moves its next fire time to next and, when job is not nil, queues
	// the job tagged with the schedule, in one transaction. It returns the
	// fire record, numbered, with the queued job's ID.
	FireSchedule(ctx context.Context, id string, f ScheduleFire, next time.Time, job *Job) (ScheduleFire, error)
	// ImportSchedule stores a schedule copied from another database as
	// given, under its own ID, with its firing history (ErrExists when the
	// ID or the name is taken here); AddSchedule numbers after it.
	ImportSchedule(ctx context.Context, s Schedule, fires []ScheduleFire) error
	// ScheduleFires returns the last n firings of a schedule (n <= 0:
	// all), oldest first (ErrNotFound for a missing schedule).
	ScheduleFires(ctx context.Context, id string, n int) ([]ScheduleFire, error)

	// BeginRun stores r as a new benchmark run in state running (numbered
	// "rN") and returns its ID.
	BeginRun(ctx context.Context, r *Run) (string, error)
	// AddCell appends a measured cell and its raw per-request data to a
	// running run (ErrRunState otherwise).
	AddCell(ctx context.Context, id string, c CellResult, raw []byte) error
	// FinishRun ends a running run in state st.
	FinishRun(ctx context.Context, id string, st RunState, reason string, end time.Time) error
	// ImportRun stores a finished run with the raw data of its cells.
	ImportRun(ctx context.Context, r *Run, raws [][]byte) (string, error)
	// Run returns one run; a running run whose writer died reads as
	// RunPartial.
	Run(ctx context.Context, id string) (Run, error)
	// Runs lists the runs matching f, oldest first.
	Runs(ctx context.Context, f RunFilter) ([]Run, error)
	// RunRaw returns the raw data of cell i of a run (ErrNotFound when it
	// kept none).
	RunRaw(ctx context.Context, id string, cell int) ([]byte, error)
}
