"""The consumer: claim jobs, run the handler, settle each job with its token.

Read it top to bottom the way it runs:

* ``run()`` is the *fetcher* loop, on the calling thread. Each cycle sends one
  pipeline that settles the jobs finished since the last cycle (complete or
  retry, fenced by their tokens) and claims as many new jobs as there is room
  for. Claimed jobs go to a local run queue.
* ``concurrency`` worker threads take jobs from the run queue and call the
  handler. The outcome (complete, retry, drop) is put on the ack list; the
  fetcher sends it with its next cycle. A worker wakes the fetcher only when
  that gives it a cycle to send (room to claim, or acks with nothing left to
  run): a wake-up per job would cost a thread switch and a GIL hand-off each.
* While the queue is busy (the last claim came back full) and the consumer
  runs SELF_SERVE_THREADS threads or more, a worker that finds the run
  queue empty claims for itself instead: a few jobs (SELF_CLAIM at most),
  in one round trip with the acks waiting, and runs them on its own thread;
  the fetcher stands by. Many short claims interleave with the handlers'
  own calls to Valkey, where one long claim would hold the server while
  they all wait, and no job is handed between threads (``_serve_self``).
  A thread held up by a slow job hands the jobs it claimed behind it to
  the run queue for a free thread (``_unblock``); a stop hands them back.
* Concurrency adapts by default (``concurrency=None``): one thread to start
  with, and more, up to MAX_THREADS, while jobs wait and the handlers block
  (the thread sleeps inside the handler: a network call, a query), since
  another thread can use the core meanwhile. A handler that only computes
  keeps one thread: with the GIL, more would take turns, not add speed
  (see ``_grow``). MAX_THREADS is 48, not the 8 or so a handler's own
  waits would need: when handlers talk to the Valkey that holds the queue,
  each claim script holds that server while their calls wait behind it;
  with more threads in flight, more replies come back after it to keep
  the core busy, and the server answers more calls per wake-up
  (bench/README.md, ``bench.work``).
* When a claim comes back short (the queue had nothing more ready), the
  fetcher parks on ``BLPOP emq:{q}:wake emq:{q}:wake:<consumer id>`` for up
  to one beat. An enqueue pushes a token on the first list (and a short claim
  empties it, so no stale token wakes a consumer for nothing); a worker that
  finishes jobs while the fetcher is parked sends their acks itself, in one
  round trip (it rings the fetcher's doorbell only when Valkey is
  unreachable), so an idle consumer costs one blocked call per beat, a
  finished job is acknowledged at once, and the fetcher stays parked.
  When a worker thread waits for work (and the handler takes one job), the
  fetcher hands that park to it instead: the worker parks, and on a wake
  claims and starts the first job itself, so the job that ends a quiet
  spell is not handed from the fetcher's thread to a worker's, one thread
  wake-up fewer before its handler starts (``_park_or_hand_over``).
* ``batch_window_ms`` (handler_many only): when a wake token ends a park
  within two windows of the previous wake-up (jobs are streaming in), the
  fetcher waits that long before it claims, so jobs arriving close together
  are claimed, scored and acknowledged as one batch instead of one by one.
  The first job after a quiet spell is claimed at once; a job in a stream
  waits a window at most.
* A heartbeat thread extends the lease of every job in hand every lease/3, so
  a slow handler keeps its lease for as long as its process lives. Its reply
  also says when a job was cancelled or its lease lost: ``job.cancelled``
  turns true, so the handler can stop at its next ``job.check()``.
* Prefetch adapts by default (``prefetch=None``): the window of jobs claimed
  ahead grows while handlers are short and shrinks to zero for slow ones, so a
  prefetched job never waits long behind a slow handler that another consumer
  could have run it beside (see ``_adapt``).
* A rate limit (``Queue.set_rate_limit``) that cuts a claim short comes
  with the time its window reopens: the fetcher waits that long without
  listening for wake tokens (each new job would wake it to claim nothing),
  sending the acks of jobs that finish meanwhile. While rate-limited lanes
  cool, it parks as usual but no longer than until the first reopens.
* ``drain()`` runs the same loop without ever parking and returns once a
  claim finds nothing ready and no job is in hand (tests, one-off runs).
* No thread dies silently: a bug in the consumer's own code is logged with
  its traceback and stops the consumer; ``run()`` then raises
  ``ConsumerCrashed`` so the process exits non-zero and a supervisor restarts it.
* ``last_pass`` is the monotonic time the fetcher last went round its loop
  (at least once a beat, or a reconnect back-off, while it runs): the
  process's liveness (``echomq.health``). Every thread is marked with the
  queue, and a handler's thread with its job, for log lines (``echomq.logs``).

Delivery is at-least-once: a job whose worker dies is reaped and claimed
again with a higher token, and the dead worker's token can change nothing.
Handlers should be idempotent on ``job.id``.
"""
from __future__ import annotations

import collections
import logging
import queue as _queue
import random
import resource
import signal
import threading
import time
import traceback

from . import ids
from .logs import job as current_job
from .logs import queue as current_queue
from .errors import ArgumentError, Cancelled, Drop, EchoMQError, Retry, StaleToken, Unavailable, translated
from .job import Job
from .queue import MAX_BATCH, MAX_COUNT, MAX_MS, check_int

log = logging.getLogger("echomq.consumer")

CONNECTION_ERRORS = (Unavailable,)  # the core maps redis-py's errors to it (errors.translate)

# Adaptive prefetch: claim ahead at most PREFETCH_MAX jobs, and only as many
# as the threads get through in WAIT_BUDGET_S by the handlers' recent mean
# time, so a prefetched job waits about that long at most. 256: with 32
# threads or more on short handlers, a cycle (claims of half the window) takes a
# few ms, and a smaller window lets the run queue run dry meanwhile.
PREFETCH_MAX = 256
WAIT_BUDGET_S = 0.05
DEFAULT_BATCH = 50  # most jobs in one handler_many call
MAX_WINDOW_MS = 1_000  # batch_window_ms: a window is a few ms; a second is already a bug
# Adaptive concurrency (concurrency=None): at most MAX_THREADS handler
# threads; every PROBE_EVERY-th handler call counts whether it slept (a
# voluntary context switch of its thread), and threads are added while at
# least half the probed calls did. Each thread that does I/O holds its own
# connections (a database connection per thread under Django). Every 2nd
# call at first: 1 to 48 threads in about 200 jobs (probing stops at the
# most); a handler that computes is probed ever less often (see _grow).
# 48, not 32: with claims of SELF_CLAIM jobs, the default Consumer reached
# 75% of the ceiling with 48 threads against 71% with 32 (bench.work's
# workload, 12 interleaved rounds; 32 threads with claims of 24: 70%).
MAX_THREADS = 48
DRAIN_MAX_NEW = 1_000  # jobs admitted after a drain began that it claims at most (Consumer.drain)
PROBE_EVERY = 2
PROBE_EVERY_MAX = 16
PROBES = 16  # probed calls a decision rests on
# A worker thread that finds the run queue empty while the queue is busy
# claims for itself (see _serve_self): at most SELF_CLAIM jobs, in one round
# trip that also carries the acks waiting. 24: a round trip costs the
# worker tens of us of CPU whatever it carries (63 for a claim of one,
# 93 for a claim of 16, in a process doing nothing else), and claims of 8 cost the server
# 13% more per job than 16 (``bench.work instructions``); longer ones hold
# Valkey longer while the handlers' own calls wait behind them, which more
# threads make up for (MAX_THREADS): 24 with 48 threads took 33.0 us of
# worker CPU per job against 34.3 for 16 with 32.
SELF_CLAIM = 24
# ... once it runs this many threads. With fewer, the time each thread
# spends waiting on its own claims costs more than the fetcher's long claims
# do (bench.work, one INCR per job: 8 threads 49% of the ceiling claiming
# for themselves against 54% with the fetcher, 16 threads 56% against 52%).
SELF_SERVE_THREADS = 16
# A worker that parked for the fetcher and woke claims, then starts its job
# without waking the fetcher (unless more is ready): the fetcher, woken as
# the claim went out, looks for the answer every CLAIM_POLL_S meanwhile.
# Woken just before the handler starts instead, it took the core and the
# GIL from the worker: on a busy machine, a 4 ms wait at p99 (bench.cluster
# latency, "hand-off"). 1 ms: a job that comes within it of the one before
# waits that much longer for the fetcher to park again.
CLAIM_POLL_S = 0.001


def _take_all(items: collections.deque) -> list:
    """Everything in ``items``, taken one popleft at a time: each is atomic,
    so a thread appending or taking at the same moment loses nothing and
    gets nothing twice (the deques a worker fills without the lock)."""
    taken = []
    try:
        while True:
            taken.append(items.popleft())
    except IndexError:
        return taken


_NUDGE = object()  # on the run queue: not a job; wakes a waiting thread to claim for itself (_serve_self)
_PARK = object()   # on the run queue: not a job; the thread that takes it parks for the fetcher (_park_or_hand_over)
_PENDING = object()  # Consumer._handover: a park handed over, not taken by a worker yet
_TAKEN = object()    # ... while the worker that took it parks
_CLAIMING = object()  # ... and claims after a wake (the fetcher looks for its answer every CLAIM_POLL_S)
_CALLED_OFF = object()  # ... or called off before a worker took it (a stop): the _PARK left is ignored


class _Own:
    """A worker thread's own jobs: claimed by it (Consumer._serve_self) and
    not started yet, and when it started the one it runs or ran last in
    this batch (0: between batches)."""
    __slots__ = ("jobs", "since")

    def __init__(self):
        self.jobs: collections.deque[Job] = collections.deque()
        self.since = 0.0


class ConsumerCrashed(EchoMQError):
    """A consumer thread failed in the consumer's own code (not a handler's
    failure, which is data): logged with its traceback; ``run()`` stops and
    raises this so the process exits non-zero."""


def _valid_delay(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_MS


def _safe_text(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()
    except Exception:  # a broken __str__ must not cost the job
        return type(exc).__name__


def exponential_backoff(base_ms: int = 1_000, cap_ms: int = 60_000):
    """Delay before retry ``attempt`` (1, 2, ...): base * 2^(attempt-1), capped,
    with "equal jitter" (half fixed, half random) so retries spread out."""

    def backoff(attempt: int) -> int:
        delay = min(cap_ms, base_ms * (2 ** max(0, attempt - 1)))
        return delay // 2 + random.randint(0, delay // 2)

    return backoff


_DEFAULT_BACKOFF = exponential_backoff()


_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)  # Linux


def _thread_clock() -> tuple[int, float, float]:
    """This thread's voluntary context switches so far (0 where the OS does
    not count them per thread), CPU time and the wall clock: a probe."""
    sleeps = resource.getrusage(_RUSAGE_THREAD).ru_nvcsw if _RUSAGE_THREAD is not None else 0
    return sleeps, time.thread_time(), time.monotonic()


def _slept(before: tuple[int, float, float]) -> bool:
    """Whether the thread blocked since ``before`` (a handler waiting on I/O
    or a lock): it gave up the CPU (where that is counted) and was off it
    for a tenth of the wall time or more. Even a fast round trip qualifies
    (a thread that sleeps pays a wake-up; another thread's work would have
    filled the gap); a handler that only computes does not, whether it was
    preempted on a busy machine (not a voluntary switch) or handed the GIL
    over once in a long computation (off the CPU for a sliver of it)."""
    sleeps, cpu, wall = _thread_clock()
    blocked = sleeps > before[0] or _RUSAGE_THREAD is None
    return blocked and (cpu - before[1]) < 0.9 * (wall - before[2])


def _raiser(result):
    """A one-job handler that gives ``result``: an exception is raised, anything else completes."""
    def handler(job):
        if isinstance(result, BaseException):
            raise result
    return handler


class Observer:
    """What a consumer reports as it works (metrics hang here; see
    ``echomq.metrics``). Every method is a no-op; calls come from the
    fetcher and worker threads and must be quick and never raise."""

    def claimed(self, consumer, jobs) -> None: ...
    def started(self, consumer, job) -> None: ...
    def handled(self, consumer, job, seconds: float) -> None: ...
    def settled(self, consumer, job, outcome: str) -> None: ...  # completed|dropped|retried|dead|stale|cancelled
    def reconnecting(self, consumer) -> None: ...


def _valid_attempts(value) -> int | None:
    """A handler's own ``Retry.max_attempts`` when it is a whole number the
    retry takes (1..MAX_COUNT, as the consumer's own), else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_COUNT
    return value if ok else None


class _Outcome:
    __slots__ = ("job", "kind", "delay_ms", "error", "max_attempts")

    def __init__(self, job: Job, kind: str, delay_ms: int = 0, error: str = "", max_attempts: int | None = None):
        self.job, self.kind, self.delay_ms, self.error = job, kind, delay_ms, error
        self.max_attempts = max_attempts


class Consumer:
    """Runs ``handler(job)`` for the jobs of ``queue``.

    handler returns      -> the job is completed.
    raises ``Drop``      -> the job is completed without running again.
    raises ``Retry`` or any other exception -> retried after a backoff
                            (``Retry.delay_ms`` if given) until it has had
                            ``max_attempts``, then dead-lettered with the error.

    ``concurrency`` handler threads run at once; ``None`` (the default)
    adapts it: one thread, and up to ``MAX_THREADS`` while jobs wait and
    the handlers block on I/O, so a handler that calls a database or
    Valkey overlaps its waits without a setting, and one that only computes
    stays on one thread. Handlers must then be safe to run on several
    threads at once; pass ``concurrency=1`` for a handler that is not.

    ``prefetch`` jobs beyond ``concurrency`` may be claimed ahead (batch
    claim); they are leased and heart-beaten while they wait, and handed back
    unstarted when the consumer stops. ``None`` (the default) adapts it to
    the handlers' speed; an int fixes it (0: claim only for idle threads).

    Instead of ``handler``, ``handler_many(jobs)`` takes up to ``batch`` claimed
    jobs at once (whatever is waiting when a thread is free, so a light load
    still goes one by one) and returns one result per job, in order: None
    (or any non-exception) completes that job; an exception (``Drop``,
    ``Retry``, any other) settles it as if ``handler`` had raised it. If
    ``handler_many`` itself raises, every job of the batch gets that outcome.
    Each thread holds up to ``batch`` jobs, so ``concurrency * batch +
    prefetch`` are claimed at most.

    ``batch_window_ms`` (with ``handler_many``; default 0, off): when a
    wake-up follows the previous one within two windows, wait this long
    before claiming, so a moderate stream (say 200 jobs/s) is handled in
    batches of several jobs instead of one job per claim, handler call and
    ack. The first job after a quiet spell is claimed at once (a player's
    lone guess pays no window); a busy consumer (one that never parks)
    never waits.
    """

    def __init__(self, queue, handler=None, *, handler_many=None, batch: int | None = None,
                 concurrency: int | None = None, lease_ms: int = 30_000,
                 max_attempts: int = 3, backoff=None, beat_ms: int = 1_000, prefetch: int | None = None,
                 grace_ms: int = 10_000, name: str | None = None, observer: Observer | None = None,
                 batch_window_ms: int = 0):
        # Checked here, so a setting the scripts would refuse fails now, not in a thread later.
        if (handler is None) == (handler_many is None):
            raise ArgumentError("give exactly one of handler and handler_many")
        # ... and so does one that would fail every job, or the fetcher, at run time.
        if not all(callable(getattr(queue, method, None)) for method in ("parking", "batch", "add_claim")):
            raise ArgumentError(f"queue must be a Queue or a ShardedQueue, got {type(queue).__name__}")
        for what, value in (("handler", handler), ("handler_many", handler_many), ("backoff", backoff)):
            if value is not None and not callable(value):
                raise ArgumentError(f"{what} must be callable, got {type(value).__name__}")
        if observer is not None and not isinstance(observer, Observer):
            raise ArgumentError(f"observer must be an echomq.consumer.Observer, got {type(observer).__name__}")
        if batch is not None and handler_many is None:
            raise ArgumentError("batch is the size of a handler_many call; there is no handler_many")
        batch = 1 if handler_many is None else check_int(DEFAULT_BATCH if batch is None else batch, "batch", 1,
                                                         MAX_BATCH)
        if concurrency is not None:
            check_int(concurrency, "concurrency", 1, MAX_BATCH // batch)
        # the most threads this consumer may run: what capacity is checked against
        most = concurrency or min(MAX_THREADS, MAX_BATCH // batch)
        if prefetch is not None:
            check_int(prefetch, "prefetch", 0, MAX_BATCH - most * batch)
        check_int(lease_ms, "lease_ms", 100, MAX_MS)
        check_int(beat_ms, "beat_ms", 10, MAX_MS)
        check_int(max_attempts, "max_attempts", 1, MAX_COUNT)
        check_int(grace_ms, "grace_ms", 0, MAX_MS)
        check_int(batch_window_ms, "batch_window_ms", 0, MAX_WINDOW_MS)
        if batch_window_ms and handler_many is None:
            raise ArgumentError("batch_window_ms gathers jobs for handler_many; there is no handler_many")
        self.queue = queue
        self.handler = handler
        self.handler_many = handler_many
        self.batch = batch
        self.growing = concurrency is None  # adaptive concurrency: threads added by _grow
        self.max_concurrency = most
        self.concurrency = concurrency or 1  # threads running now
        self._busy = 0    # threads inside a handler call now
        self._calls = 0   # handler calls so far (every _probe_every-th is probed)
        self._probe_every = PROBE_EVERY
        self._probes = collections.deque(maxlen=PROBES)  # probed calls: True if the thread slept
        self.adaptive = prefetch is None
        self.prefetch = 0 if prefetch is None else prefetch
        self._mean_s: float | None = None  # recent mean handler time (EWMA)
        self._started: dict[str, float] = {}  # running job id -> monotonic start
        self._crashed: BaseException | None = None
        self.lease_ms = lease_ms
        self.max_attempts = max_attempts
        self.backoff = backoff or exponential_backoff()
        self.beat_ms = beat_ms
        self.grace_ms = grace_ms
        self.batch_window_ms = batch_window_ms
        self._last_wake = float("-inf")  # monotonic time of the fetcher's last wake-up (batch window)
        self.observer = observer or Observer()
        self._observing = type(self.observer) is not Observer  # the base class's calls do nothing: skip them
        self.id = ids.mint("CSR")
        self.name = name or f"{queue.name}/{self.id}"
        # Where the fetcher waits when nothing is ready: a plain queue BLPOPs
        # its wake list and this consumer's doorbell; a sharded queue parks
        # one blocked call per shard (echomq.parking, echomq.sharded.parking).
        self._parking = queue.parking(self.id)

        self.capacity = self.concurrency * self.batch + self.prefetch
        # Without prefetch, a free slot is filled at once. With prefetch, wait
        # until half the prefetch is used up, so claims and acks go in batches
        # while the run queue still holds work for the threads.
        self.refill_at = 1 if self.prefetch == 0 else max(1, (self.prefetch + 1) // 2)

        self._cond = threading.Condition()
        self._in_hand: dict[str, Job] = {}  # claimed and not yet settled
        self._lost: set[str] = set()        # in hand, but the lease was lost
        self._finished: set[str] = set()    # in hand, the handler done: its ack waits or is on its way
        self._acks: collections.deque[_Outcome] = collections.deque()
        self._running = 0
        self._runq: _queue.SimpleQueue = _queue.SimpleQueue()
        self._stopping = threading.Event()
        self.last_pass: float | None = None  # monotonic; None until the fetcher first goes round
        self._parked = False
        self._threads: list[threading.Thread] = []
        self._hb_stop = threading.Event()
        self.stats = collections.Counter()
        self._draining = False
        self._drain_since_ms = 0   # a drain's start (Unix ms): jobs minted after it are new
        self._drain_new_left = 0   # new jobs the drain may still claim
        self._waits = (0, 0)  # the last claim's rate-limit waits (queue, lanes), ms
        self._hot = False   # the last claim came back full: more jobs are ready (workers claim too)
        self._idle = 0      # worker threads waiting on the run queue
        self._owns: list[_Own] = []  # each worker thread's own jobs
        self._closing = False  # _shutdown began: no more threads, and a thread with nothing to run ends
        self._serves_self = handler_many is None and getattr(queue, "ready_shards", None) is None  # _self_serving
        self._stats_lock = threading.Lock()  # acks are settled by the fetcher and, while it parks, by workers
        self._handover = None  # a park handed to a worker: _PENDING, _TAKEN, its answer (_park_or_hand_over)
        self._park_timeout: float | None = None  # ... and how long it may park

    # -- public -----------------------------------------------------------
    def stop(self) -> None:
        """Stop claiming; ``run()`` finishes the jobs in hand and returns.
        A parked fetcher is rung awake now rather than at the end of its
        beat -- from a short-lived thread, as ``stop`` may run inside a
        signal handler, which must not wait on the client's locks."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
            parked = self._parked
        if parked:
            threading.Thread(target=self._ring, name=f"{self.name} stop", daemon=True).start()

    def run(self) -> None:
        """Work until ``stop()`` (or SIGTERM / SIGINT when on the main thread)."""
        restore = self._install_signals()
        marked = current_queue.set(self.queue.name)
        log.info("consumer %s started: queue=%s concurrency=%s prefetch=%s lease_ms=%d",
                 self.name, self.queue.name, f"auto (1-{self.max_concurrency})" if self.growing else self.concurrency,
                 "auto" if self.adaptive else self.prefetch, self.lease_ms)
        self._closing = False  # a consumer may drain() again after a drain
        self._start_threads()
        try:
            self._fetch_loop()
        except BaseException as exc:
            self._crash("fetcher", exc)
        finally:
            left = self._shutdown()
            restore()
            log.info("consumer %s stopped: completed=%d retried=%d dead=%d dropped=%d cancelled=%d%s",
                     self.name, self.stats["completed"], self.stats["retried"], self.stats["dead"],
                     self.stats["dropped"], self.stats["cancelled"], f" left_leased={left}" if left else "")
            current_queue.reset(marked)
        if self._crashed is not None:
            raise ConsumerCrashed(f"consumer {self.name} stopped: a thread crashed "
                                  f"({_safe_text(self._crashed)})") from self._crashed

    def drain(self, *, max_new: int = DRAIN_MAX_NEW) -> collections.Counter:
        """Handle every job that is ready now, and those that become ready
        while it runs -- a retry without delay, a delayed job falling due, a
        job a handler enqueues, a flow's parent whose last child it ran --
        then return the stats: like rq's burst mode and Oban's
        ``drain_queue`` with recursion. It returns once a claim made with
        no job in hand finds nothing ready. It never parks; jobs scheduled
        for later stay scheduled, and under a rate limit it waits for a
        window only while it holds a ready job back (the claim answers no
        wait when nothing is ready), so a drain of every job the window
        allows returns right after the last. For a project's tests
        (docs/echomq.md, "Drain: testing your handlers").

        So that it always ends, it claims at most ``max_new`` jobs admitted
        after it began (their JOB ids minted since: a handler's follow-ups,
        whatever other processes enqueue meanwhile); once it has, it claims
        no more, logs a warning, counts ``stats["drain_cut"]``, finishes the
        jobs in hand and returns. A job that enqueues another forever thus
        runs about ``max_new`` times. The jobs waiting when it began, their
        retries and flow parents (admitted with their flow) are not counted."""
        check_int(max_new, "max_new", 1, MAX_COUNT)
        self._draining = True
        self._drain_since_ms = int(time.time() * 1000)
        self._drain_new_left = max_new
        try:
            self.run()
        finally:
            self._draining = False
        return self.stats

    def _crash(self, where: str, exc: BaseException) -> None:
        """A bug in our own code: log it with its traceback and stop, so the
        process exits non-zero (``run()`` raises) rather than limp on."""
        log.critical("consumer %s: %s thread crashed; stopping", self.name, where,
                     exc_info=(type(exc), exc, exc.__traceback__))
        with self._cond:
            if self._crashed is None:
                self._crashed = exc
        self.stop()

    # -- the fetcher ------------------------------------------------------
    def _fetch_loop(self) -> None:
        failures = 0
        handed = None  # (jobs claimed, short) of the claim a worker made after the park it took
        while not self._stopping.is_set():
            self.last_pass = time.monotonic()
            if handed is None:
                claim = self._wait_for_room()
                if self._stopping.is_set():
                    break
                if self._draining and self._drain_new_left <= 0:
                    self._drain_cut()
                    break
                if self.adaptive:
                    self._shed()
                if self.growing:
                    self._grow()
            try:
                if handed is None:
                    claimed, _, short = self._cycle(claim=claim)
                else:  # the worker's claim stands for this cycle's
                    (claimed, short), handed = handed, None
                failures = 0
                if not short:  # busy: what the parking keeps waiting must not take wake tokens
                    self._parking.release()
                queue_wait, lane_wait = self._waits
                if short and (queue_wait or (lane_wait and self._draining)):
                    # the queue's window first: once it reopens a ready job may be
                    # claimed, whatever lane still cools
                    self._rate_wait((queue_wait or lane_wait) / 1000)
                elif short and self._draining:
                    if self._drain_settled(claimed):
                        break
                elif short:
                    woke, handed = self._park_or_hand_over(self._park_for(lane_wait))
                    if woke and self.batch_window_ms and self._streaming():
                        # Work keeps arriving: let the jobs close behind this
                        # one arrive too, and claim them as one batch.
                        self._stopping.wait(self.batch_window_ms / 1000)
                        self.stats["windows"] += 1
            except CONNECTION_ERRORS as exc:
                failures += 1
                self.observer.reconnecting(self)
                delay = min(5.0, 0.05 * 2 ** min(failures, 7)) * (0.5 + random.random() / 2)
                log.warning("consumer %s lost Valkey (%s); retrying in %.2fs", self.name,
                            type(exc).__name__, delay)
                self._stopping.wait(delay)

    def _park_for(self, lane_wait_ms: int) -> float | None:
        """How long the fetcher may park (None: a beat): until the first
        cooling lane reopens, and no longer than the wait budget while a
        worker thread holds jobs it has not started (it may be held up by a
        slow one: see ``_unblock``)."""
        limit = lane_wait_ms / 1000 if lane_wait_ms else None
        if self._waiting_own():
            limit = WAIT_BUDGET_S if limit is None else min(limit, WAIT_BUDGET_S)
        return limit

    def _rate_wait(self, seconds: float) -> None:
        """A rate limit's window is full: wait until it reopens, or a beat at
        most (a limit cleared or changed meanwhile is seen by the next
        claim), without listening for wake tokens (an enqueue cannot open
        the window), sending the acks of jobs that finish."""
        self.stats["rate_waits"] += 1
        cut = seconds > self.beat_ms / 1000
        until = time.monotonic() + min(seconds, self.beat_ms / 1000)
        while not self._stopping.is_set():
            left = until - time.monotonic()
            if left <= 0:
                break
            with self._cond:
                if not self._acks:
                    self._cond.wait(left)
                acks = bool(self._acks)
            if acks:
                self._cycle(claim=False)
        look_again = getattr(self.queue, "look_again", None)
        if cut and look_again is not None:  # a sharded queue: its next claim asks every shard
            look_again()

    def _drain_cut(self) -> None:
        """Draining, and the drain has claimed its ``max_new`` new jobs: it claims no more."""
        log.warning("consumer %s: the drain claimed %d jobs admitted after it began; it stops claiming "
                    "(a job that enqueues another for ever?)", self.name, self.stats["drain_new"])
        self.stats["drain_cut"] += 1

    def _drain_settled(self, claimed: int) -> bool:
        """Draining, and a claim came back short: let the jobs in hand
        finish, send their acks and promote what fell due meanwhile. Done
        when that claim found nothing (a sharded queue's claim looks only
        at shards not known to be empty, so every shard is asked instead)
        while no job was in hand (settling one may make another ready: a
        flow's parent, a job its handler enqueued), and nothing was promoted."""
        with self._cond:
            had = bool(self._in_hand)
            while len(self._in_hand) > len(self._acks) and not self._stopping.is_set():
                self._cond.wait(self.beat_ms / 1000)
        self._cycle(claim=False)
        promoted = self.queue.promote()
        ready_shards = getattr(self.queue, "ready_shards", None)
        if ready_shards is not None:  # a sharded queue
            busy = ready_shards()
            self.queue.mark_hot(busy)
            claimed = len(busy)
        with self._cond:
            idle = not self._in_hand
        return claimed == 0 and not had and idle and not promoted

    def _streaming(self) -> bool:
        """Whether this wake-up follows the last one within two windows, i.e.
        jobs are arriving at least one per window or so: then waiting one
        window gathers a batch. A job after a quiet spell is claimed at
        once, so a lone job pays no window."""
        now = time.monotonic()
        last, self._last_wake = self._last_wake, now
        return now - last < 2 * self.batch_window_ms / 1000

    def _free(self) -> int:
        """Slots free once the finished jobs are acknowledged (same cycle)."""
        return self.capacity - len(self._in_hand) + len(self._acks)

    def _room(self) -> bool:
        """Whether the fetcher has a cycle to send (under the lock): enough
        free slots to claim into, or acks while no handler has work left
        (the threads are idle, so the acks would only wait)."""
        if self._self_serving() and self._idle < self.concurrency:
            return False  # the workers claim for themselves, with the acks (_serve_self)
        return self._free() >= self.refill_at or bool(self._acks and self._running == 0 and self._runq.empty())

    def _wait_for_room(self) -> bool:
        """Block while there is too little room to claim and nothing urgent
        to ack. True: claim; False: send the acks waiting, and only them
        (the worker threads claim for themselves, but every one of them is
        held up in a handler)."""
        with self._cond:
            while not self._stopping.is_set():
                self.last_pass = time.monotonic()
                self._adapt()
                if self._waiting_own():
                    self._unblock()
                if self._room():
                    return True
                if self.adaptive and self._stuck():
                    return True  # hand the waiting prefetched jobs back (in _cycle)
                wait = self.beat_ms / 1000
                if self.adaptive and not self._runq.empty():
                    wait = min(wait, WAIT_BUDGET_S)  # watch for a handler that turns slow
                if self._waiting_own():
                    wait = min(wait, WAIT_BUDGET_S)  # watch for a thread held up with jobs behind it
                serving = self._self_serving()
                if serving:  # watch for acks no thread takes with its claim (all held up in handlers)
                    wait = min(wait, WAIT_BUDGET_S)
                    if self._idle and self._runq.empty():
                        # A thread waits while the last claim was full (a race
                        # can leave it so, and the thread that made that claim
                        # may be held up in a handler): it claims, and either
                        # finds work or clears _hot so the fetcher takes over.
                        self._runq.put(_NUDGE)
                if not self._cond.wait(wait) and self._acks:
                    return not serving  # a whole wait with acks waiting: send them now
        return True

    # -- adaptive prefetch ------------------------------------------------
    def _adapt(self) -> None:
        """Set the prefetch window (called under the lock). It doubles per
        cycle up to what the threads get through in WAIT_BUDGET_S at the
        handlers' recent mean time, and drops at once when they slow down."""
        if not self.adaptive:
            return
        if self._mean_s is None:
            target = 0
        else:
            target = min(PREFETCH_MAX, int(WAIT_BUDGET_S * self.concurrency / max(self._mean_s, 1e-6)))
        self.prefetch = target if target < self.prefetch else min(target, max(1, self.prefetch * 2))
        self.capacity = self.concurrency * self.batch + self.prefetch
        self.refill_at = 1 if self.prefetch == 0 else max(1, (self.prefetch + 1) // 2)
        self.stats["prefetch_peak"] = max(self.stats["prefetch_peak"], self.prefetch)

    def _stuck(self) -> bool:
        """Every thread runs a job longer than the wait budget while claimed
        jobs wait unstarted: another consumer could run those now."""
        if (self._runq.empty() and not self._waiting_own()) or len(self._started) < self.concurrency:
            return False
        now = time.monotonic()  # a batch of handler_many may take batch times the budget
        # a copy (made in one step, under the GIL): _run_own adds and removes entries without the lock
        return all(now - t > WAIT_BUDGET_S * self.batch for t in list(self._started.values()))

    def _waiting_own(self) -> bool:
        """Whether a worker thread holds jobs it claimed and has not started."""
        return any(own.jobs for own in self._owns)

    def _unblock(self) -> None:
        """(Under the lock.) A thread held up by a job running longer than
        the wait budget hands the jobs it claimed for itself to the run
        queue, where a thread that is free takes them. While no thread is
        free they stay (and, with adaptive prefetch, go back to the queue
        with the rest, see ``_stuck``)."""
        if self._busy >= self.concurrency:
            return
        now = time.monotonic()
        for own in self._owns:
            if own.jobs and own.since and now - own.since > WAIT_BUDGET_S:
                for job in _take_all(own.jobs):
                    self._runq.put(job)
                self.stats["unblocked"] += 1

    def _shed(self) -> None:
        """Hand back the prefetched jobs that wait behind slow handlers."""
        with self._cond:
            if not self._stuck():
                return
            self._mean_s = max(self._mean_s or 0.0, 2 * WAIT_BUDGET_S * self.concurrency)  # window 0
            self._adapt()
        waiting = self._take_unstarted()
        if waiting:
            self._release(waiting)
            self.stats["shed"] += len(waiting)

    def _cycle(self, *, claim: bool, most: int = MAX_BATCH, run: bool = True, own: bool = False,
               going=None) -> tuple:
        """One round trip: settle finished jobs and claim into free slots
        (``most`` at most). Answers (jobs claimed, acks sent, short): short
        when a claim got fewer jobs than it asked for, so nothing more is
        ready now. The fetcher and workers may run cycles at once (the
        fetcher claims only while the workers do not, see ``_room``). With
        ``run=False`` the jobs claimed are answered, not put on the run
        queue: (jobs, acks sent, short). ``going()``, if given, is called
        just before the round trip goes out."""
        with self._cond:
            # a worker's own claim is bounded by its size, not by the free slots
            free = (most if own else min(self._free(), most)) if claim else 0
            acks = _take_all(self._acks)  # a worker appends without the lock (_run_own)
        if not acks and free <= 0:
            return 0, 0, False
        # Completions and drops go in one complete_batch call; retries, rarer,
        # one script call each; the claim last. All in one round trip.
        done, pairs, failed = [], [], []
        for out in acks:
            kind = out.kind
            if kind == "complete" or kind == "drop":
                done.append(out)
                pairs.append((out.job.id, out.job.attempts))
            elif kind == "retry":
                failed.append(out)
            else:  # cancelled: the queue dropped it already
                with self._stats_lock:
                    self.stats["cancelled"] += 1
                log.info("consumer %s: handler stopped cancelled job %s", self.name, out.job.id,
                         extra={"job_id": out.job.id})
        try:  # building a sharded batch may already ask Valkey where a job lives
            batch = self.queue.batch()
            if done:
                self.queue.add_complete_batch(batch, pairs)
            for out in failed:
                self.queue.add_retry(batch, out.job.id, out.job.attempts, delay_ms=out.delay_ms,
                                     max_attempts=out.max_attempts or self.max_attempts, error=out.error)
            if free > 0:
                self.queue.add_claim(batch, free, lease_ms=self.lease_ms, consumer=self.id)
            if going is not None:
                going()
            replies = batch.run()
        except CONNECTION_ERRORS:
            with self._cond:  # send them again after reconnecting (fenced, so safe)
                self._acks.extendleft(reversed(acks))
            raise
        answers = []
        if done:
            first = replies[0]
            answers = [first] * len(done) if isinstance(first, Exception) else self.queue.batch_answers(first)
        answers += replies[1 if done else 0: len(replies) - (1 if free > 0 else 0)]
        self._settle(done + failed, answers)
        if free > 0 and isinstance(replies[-1], Exception):
            raise replies[-1]
        jobs = self.queue.parse_claim(replies[-1]) if free > 0 else []
        if free > 0:
            self._waits = (getattr(jobs, "queue_wait_ms", 0), getattr(jobs, "lane_wait_ms", 0))
            self._hot = len(jobs) >= free and not self._waits[0] and not self._draining
        with self._cond:
            in_hand, lost, finished = self._in_hand, self._lost, self._finished
            for out in acks:
                job_id = out.job.id
                in_hand.pop(job_id, None)
                finished.discard(job_id)
                if lost:
                    lost.discard(job_id)
            for job in jobs:
                in_hand[job.id] = job
        if jobs and self._draining:
            new = sum(1 for job in jobs if ids.minted_at_ms(job.id) >= self._drain_since_ms)
            self._drain_new_left -= new
            self.stats["drain_new"] += new
        if jobs and self._observing:
            self.observer.claimed(self, jobs)
        short = free > 0 and len(jobs) < free
        if not run:
            return jobs, len(acks), short
        put = self._runq.put
        for job in jobs:
            put(job)
        return len(jobs), len(acks), short

    def _settle(self, outs: list[_Outcome], replies: list) -> None:
        """Count and report what the queue answered to each ack."""
        with self._stats_lock:
            completed = 0
            for out, reply in zip(outs, replies):
                if reply is True and out.kind == "complete":  # the common case, counted at once
                    completed += 1
                    if self._observing:
                        self.observer.settled(self, out.job, "completed")
                else:
                    self._settled(out, reply)
            if completed:
                self.stats["completed"] += completed

    def _settled(self, out: _Outcome, reply) -> None:
        job = out.job
        about = {"job_id": job.id}  # for the log lines below
        if isinstance(reply, StaleToken):
            self.stats["stale"] += 1
            self.observer.settled(self, job, "stale")
            log.warning("consumer %s: %s %s refused, token %d is stale (the lease was reaped)",
                        self.name, out.kind, job.id, job.attempts, extra=about)
        elif isinstance(reply, Cancelled):
            self.stats["cancelled"] += 1
            self.observer.settled(self, job, "cancelled")
            log.info("consumer %s: %s %s refused, the job was cancelled", self.name, out.kind, job.id,
                     extra=about)
        elif isinstance(reply, Exception):
            # Not settled; the job stays leased until the reaper returns it.
            self.stats["unsettled"] += 1
            log.error("consumer %s: %s %s failed: %s; the reaper will return it", self.name, out.kind,
                      job.id, _safe_text(reply), extra=about)
        elif reply == 0:
            self.stats["gone"] += 1
            log.info("consumer %s: %s %s: the job was gone (removed)", self.name, out.kind, job.id,
                     extra=about)
        elif out.kind == "complete":
            self.stats["completed"] += 1
            self.observer.settled(self, job, "completed")
        elif out.kind == "drop":
            self.stats["dropped"] += 1
            self.observer.settled(self, job, "dropped")
            log.info("consumer %s dropped %s: %s", self.name, job.id, out.error, extra=about)
        elif reply in (b"dead", "dead"):
            self.stats["dead"] += 1
            self.observer.settled(self, job, "dead")
            log.error("consumer %s dead-lettered %s after %d attempts: %s", self.name, job.id,
                      job.attempts, out.error.splitlines()[0] if out.error else "", extra=about)
        elif reply in (b"scheduled", "scheduled"):
            self.stats["retried"] += 1
            self.observer.settled(self, job, "retried")
            log.warning("consumer %s will retry %s in %dms (attempt %d): %s", self.name, job.id,
                        out.delay_ms, job.attempts, out.error.splitlines()[0] if out.error else "", extra=about)

    def _park(self, timeout_s: float | None = None) -> bool:
        """Nothing to claim: block on the wake list and our doorbell for a
        beat (or ``timeout_s`` when shorter: a cooling lane reopens then).
        True when a wake token (new work) ended it, not the doorbell, acks
        waiting, the stop or the timeout."""
        beat = self.beat_ms / 1000 if timeout_s is None else min(self.beat_ms / 1000, max(timeout_s, 0.001))
        with self._cond:
            # parked first, then the acks: a worker appends its ack without the
            # lock and then reads _parked, so one of the two sees the other
            self._parked = True
            if self._acks or self._stopping.is_set():
                self._parked = False
                return False
        try:
            with translated():
                # a sharded queue answers the shards woken (all of them after
                # a timeout: then a window is just a short wait)
                return bool(self._parking.wait(beat))
        finally:
            with self._cond:
                self._parked = False

    def _park_or_hand_over(self, timeout_s: float | None) -> tuple[bool, tuple | None]:
        """Park (see ``_park``): here, or, when a worker thread waits for
        work and the handler takes one job, in that thread, while this one
        waits for its answer. On a wake the worker claims, starts the first
        job itself and puts the rest on the run queue: the job is not handed
        from the fetcher's thread to a worker's, which, on a busy machine,
        is a thread wake-up that waits for a core, then for the GIL the
        fetcher holds (bench.cluster latency, "hand-off"). Answers (woke,
        claim): claim is the worker's (jobs claimed, short), which the
        fetcher takes as its own next cycle's, or None."""
        with self._cond:
            hand = (self.handler is not None and self._idle > 0 and self._runq.empty()
                    and not self._closing and not self._stopping.is_set())
            if hand:
                self._handover = _PENDING
                self._park_timeout = timeout_s
                self._runq.put(_PARK)
        if not hand:
            return self._park(timeout_s), None
        with self._cond:
            # Once a worker took the park, it answers whatever happens
            # (_park_for_fetcher), and the parking is in its hands until
            # then: this waits for it. One not taken yet is called off at a stop.
            while (state := self._handover) is _PENDING or state is _TAKEN or state is _CLAIMING:
                if state is _PENDING and self._stopping.is_set():
                    self._handover = _CALLED_OFF
                    break
                self._cond.wait(CLAIM_POLL_S if state is _CLAIMING else self.beat_ms / 1000)
            answer, self._handover = self._handover, None
        if answer is _CALLED_OFF:
            return False, None
        if isinstance(answer, BaseException):
            raise answer  # Unavailable: the fetcher reconnects; anything else is a crash
        return answer

    def _claiming(self) -> None:
        """The claim after a worker's wake goes out: wake the fetcher now,
        while the worker waits for the reply, not as its job starts."""
        with self._cond:
            self._handover = _CLAIMING
            self._cond.notify_all()

    def _park_for_fetcher(self, own: _Own) -> None:
        """(A worker thread that took _PARK.) Park for the fetcher; on a
        wake, claim, keep the first job to run here and put the rest on
        the run queue; then answer the fetcher and run the job."""
        with self._cond:
            if self._handover is not _PENDING:
                return  # called off meanwhile (a stop)
            self._handover = _TAKEN
        answer: object = (False, None)
        try:
            if self._park(self._park_timeout) and not self._stopping.is_set():
                jobs, _, short = self._cycle(claim=True, run=False, going=self._claiming)
                if jobs:
                    own.jobs.append(jobs[0])
                    for job in jobs[1:]:
                        self._runq.put(job)
                answer = (True, (len(jobs), short))
                self.stats["worker_wakes"] += 1
        except BaseException as exc:
            answer = exc  # raised on the fetcher's thread, which handles it as its own
        finally:
            with self._cond:
                self._handover = answer
                counted = bool(own.jobs)
                if counted:  # _run_own's opening, here: nothing to wait for between the answer and the job
                    self._running += 1
                    self._busy += 1
                short = isinstance(answer, tuple) and answer[1] is not None and answer[1][1]
                if not (counted and short):
                    # the fetcher has something to do now: more jobs are
                    # ready (the claim came back full), or no job runs here
                    self._cond.notify_all()
        if counted:
            self._run_own(own, counted=True)

    # -- workers ----------------------------------------------------------
    def _start_threads(self) -> None:
        for _ in range(self.concurrency):
            self._start_worker()
        hb = threading.Thread(target=self._heartbeat_loop, name=f"{self.name}-heartbeat", daemon=True)
        hb.start()
        self._heartbeat = hb

    def _start_worker(self) -> None:
        t = threading.Thread(target=self._work_loop, name=f"{self.name}-worker-{len(self._threads)}", daemon=True)
        with self._cond:
            self._threads.append(t)  # before it starts: _shutdown joins every thread it can see
        t.start()

    def _grow(self) -> None:
        """Adaptive concurrency (the fetcher between cycles, a thread after a
        probed call or before claiming for itself): double the threads, up
        to max_concurrency, when no thread waits for work, jobs wait (in
        the run queue, or ready in the queue: the last claim was full),
        and at least half the recent probed handler calls slept (their
        thread blocked on I/O or a lock, leaving the core to others). When
        fewer than half did, the handlers compute: the calls are probed
        half as often from then on, down to one in PROBE_EVERY_MAX (the
        window of the last PROBES probes rolls on, so handlers that start
        to block still tip it).
        Threads are never retired: an idle one waits on the run queue and
        costs nothing."""
        with self._cond:
            probes = self._probes
            if len(probes) < PROBES or self._stopping.is_set() or self._closing:
                return
            if 2 * sum(probes) < len(probes):  # the handlers compute: probe less and less often
                self._probe_every = min(PROBE_EVERY_MAX, 2 * self._probe_every)
                return  # the window rolls on: each new probe may tip it
            if self._idle or (self._runq.empty() and not self._hot):
                return  # a thread waits for work, or no job waits for a thread
            self._probe_every = PROBE_EVERY
            add = min(self.concurrency, self.max_concurrency - self.concurrency)
            self.concurrency += add
            self.capacity = self.concurrency * self.batch + self.prefetch
            self.growing = self.concurrency < self.max_concurrency
            probes.clear()  # the next step rests on calls made with the new threads
        for _ in range(add):
            self._start_worker()
        self.stats["threads"] = self.concurrency
        log.info("consumer %s: handlers block on I/O with jobs waiting; %d threads now", self.name,
                 self.concurrency)

    def _work_loop(self) -> None:
        current_queue.set(self.queue.name)  # this thread's own context, for its log lines
        runq, own = self._runq, _Own()
        with self._cond:
            self._owns.append(own)
        stop = False
        while not stop:
            try:
                job = runq.get_nowait()
            except _queue.Empty:
                try:
                    if self._serve_self(own):
                        self._run_own(own)
                        continue
                except BaseException as exc:
                    self._crash("worker", exc)
                    return
                with self._cond:
                    if self._closing:
                        return  # started as the consumer shut down (a late _grow): nothing will come
                    self._idle += 1
                    if self._idle >= self.concurrency:
                        self._cond.notify_all()  # no thread claims for itself now: the fetcher does (_room)
                job = runq.get()
                with self._cond:
                    self._idle -= 1
            if job is _NUDGE:
                continue
            if job is _PARK:
                try:
                    self._park_for_fetcher(own)
                except BaseException as exc:
                    self._crash("worker", exc)
                    return
                continue
            if job is None:
                return
            jobs = [job]
            while len(jobs) < self.batch:  # with handler_many: whatever else is waiting
                try:
                    job = runq.get_nowait()
                except _queue.Empty:
                    break
                if job is None:  # this thread's stop sentinel: finish the batch, then stop
                    stop = True
                    break
                if job is _PARK:  # (handler_many: never handed one; see _park_or_hand_over)
                    self._runq.put(job)
                    break
                if job is not _NUDGE:
                    jobs.append(job)
            try:
                self._work(jobs)
            except BaseException as exc:
                self._crash("worker", exc)  # the jobs stay leased: reaped after their lease
                return

    def _run_own(self, own: _Own, counted: bool = False) -> None:
        """Run, one by one on this thread, the jobs it claimed for itself
        (``_serve_self``), as ``_work`` runs one, with the shared
        bookkeeping done once for them all (this loop is the consumer's
        per-job cost when it is busy, so it does no more than it must). A
        job still in ``own.jobs`` may be taken meanwhile: by the fetcher
        for another thread when this one is held up by a slow job
        (``_unblock``), or handed back on a stop."""
        handler, started, observing, pending = self.handler, self._started, self._observing, own.jobs
        stopping, monotonic, outcome, set_job, reset_job = (self._stopping.is_set, time.monotonic, _Outcome,
                                                          current_job.set, current_job.reset)
        # Each outcome goes on the ack list as its job ends, without the lock
        # (a deque's append and a set's add are atomic): the next claim of
        # any thread sends it, even while this thread is held up by a slow job.
        finished, ack = self._finished.add, self._acks.append
        if not counted:  # (counted: the caller did this under the lock it held already)
            with self._cond:
                self._running += 1
                self._busy += 1
        done = 0
        first = start = monotonic()  # a job starts when the one before it ends
        try:
            while not stopping():
                try:
                    job = pending.popleft()
                except IndexError:
                    break
                before = None
                if self.growing:
                    self._calls += 1
                    if self._calls % self._probe_every == 0:
                        before = _thread_clock()
                if observing:
                    self.observer.started(self, job)
                own.since = started[job.id] = start
                marked = set_job(job.id)
                try:
                    handler(job)
                except BaseException as exc:
                    out = self._failed(job, exc)
                else:
                    out = outcome(job, "complete")
                finally:
                    reset_job(marked)
                finished(job.id)  # before its ack is seen: a cycle that settles the ack discards it here
                ack(out)
                done += 1
                if self._parked:  # nothing else was ready: send it now, as _work does
                    self._send_acks()
                end = monotonic()
                del started[job.id]
                if before is not None:
                    self._probes.append(_slept(before))
                if observing:
                    self.observer.handled(self, job, end - start)
                start = end
        finally:
            own.since = 0.0
            rest = _take_all(pending) if self._stopping.is_set() else []  # claimed as the stop came
            if rest:
                self._release(rest)
            with self._cond:
                self._running -= 1
                self._busy -= 1
                if done:  # the mean as if each of the jobs had been added on its own
                    took, keep = (start - first) / done, 0.8 ** done
                    self._mean_s = took if self._mean_s is None else keep * self._mean_s + (1 - keep) * took
                if self._room() or self._stopping.is_set():
                    self._cond.notify_all()

    def _work(self, jobs: list[Job]) -> None:
        n, started = len(jobs), self._started
        with self._cond:
            self._running += n
            start = time.monotonic()
            for job in jobs:
                started[job.id] = start
            self._busy += 1
            self._calls += 1
            probe = self.growing and self._calls % self._probe_every == 0
        before = _thread_clock() if probe else None
        if self._observing:
            for job in jobs:
                self.observer.started(self, job)
        marked = current_job.set(jobs[0].id if n == 1 else None)
        try:
            outs = self._handle_many(jobs) if self.handler_many else [self._handle(jobs[0])]
        finally:
            current_job.reset(marked)
        slept = before is not None and _slept(before)
        took = (time.monotonic() - start) / n
        if self._observing:
            for job in jobs:
                self.observer.handled(self, job, took)
        with self._cond:
            self._running -= n
            self._busy -= 1
            finished = self._finished
            for job in jobs:
                started.pop(job.id, None)
                finished.add(job.id)
            self._mean_s = took if self._mean_s is None else 0.8 * self._mean_s + 0.2 * took
            if before is not None:
                self._probes.append(slept)
            first = not self._acks
            self._acks.extend(outs)
            parked = self._parked
            # Wake the fetcher only when it has something to do (or, once a
            # cycle, for the first ack, which a rate-limit wait listens for):
            # waking it for every job costs a thread switch and a GIL hand-off each.
            if (first and not self._hot) or self._room() or self._stopping.is_set():
                self._cond.notify_all()
        if before is not None and len(self._probes) >= PROBES:
            self._grow()  # as soon as the probes allow (the fetcher may wait a whole cycle)
        if parked:
            self._send_acks()

    def _self_serving(self) -> bool:
        """Whether worker threads claim for themselves now (``_serve_self``):
        the last claim came back full, the handler takes one job (no
        handler_many, even with batch=1), the queue is a plain one, the consumer is not draining, and it runs
        SELF_SERVE_THREADS threads or more (with fewer, the fetcher's
        claims, made while the threads run, are faster; a handler that
        only computes keeps one thread). A sharded consumer's fetcher claims from one
        shard while it answers full, so that its acks and its claim share
        a shard; claims from every thread would split the acks over the
        shards (0.14 script calls per job on the 3+3 cluster against 0.06,
        ``test_cluster_pipeline``)."""
        return self._hot and self._serves_self and not self._draining and self.concurrency >= SELF_SERVE_THREADS

    def _serve_self(self, own: _Own) -> bool:
        """The run queue is empty: while the queue is busy (the last claim
        came back full), claim a few jobs from this thread into
        ``own.jobs``, with the acks waiting, to run them here rather than
        wait for the fetcher's next cycle. As many as this thread gets
        through in WAIT_BUDGET_S at the handlers' recent mean time
        (SELF_CLAIM at most; with a fixed prefetch, one plus this thread's
        share of it). True when it claimed any.

        Why: with the fetcher alone, each of its claims is a long script
        (a hundred jobs or more) that holds Valkey while every handler's
        own call to Valkey waits behind it, and each job is handed from
        the fetcher's thread to a worker's. Small claims from each thread
        that is free interleave with the handlers' calls, and the claiming
        thread runs its jobs itself (bench/README.md, ``bench.work``).
        See ``_self_serving`` for when."""
        # Read without the lock: a stale answer costs one claim that comes back
        # short (the fetcher then takes over) or one wait on the run queue.
        if not self._self_serving() or self._parked or self._stopping.is_set():
            return False
        mean = self._mean_s or WAIT_BUDGET_S
        if self.adaptive:
            most = max(1, min(SELF_CLAIM, int(WAIT_BUDGET_S / max(mean, 1e-6))))
            ahead = self.concurrency * (most - 1)  # the most its threads claim ahead of their jobs
            if ahead > self.stats["prefetch_peak"]:
                self.stats["prefetch_peak"] = ahead
        else:
            most = max(1, min(SELF_CLAIM, 1 + self.prefetch // self.concurrency))
        if self.growing:
            self._grow()
        try:
            jobs, _, _ = self._cycle(claim=True, most=most, run=False, own=True)
        except CONNECTION_ERRORS:
            with self._cond:
                self._hot = False  # the fetcher reconnects; the acks were put back
                self._cond.notify_all()
            return False
        own.jobs.extend(jobs)
        if not jobs or not self._hot:
            with self._cond:
                self._cond.notify_all()  # nothing more ready: the fetcher takes over (and parks)
        elif self._idle and self._runq.empty():
            self._runq.put(_NUDGE)  # more is ready: a waiting thread claims too, and so on
        return bool(jobs)

    def _send_acks(self) -> None:
        """The fetcher is parked (nothing was ready at its last claim): send
        the acks from this thread in one round trip, rather than ring it
        awake for a cycle of its own and a claim that finds nothing -- on a
        sharded queue that would also end and send again its parked call on
        every shard. The doorbell is rung only when Valkey is unreachable
        (the acks are put back, and the fetcher, which is failing too,
        sends them later)."""
        try:
            self._cycle(claim=False)
        except CONNECTION_ERRORS:
            self._ring()

    def _ring(self) -> None:
        """Wake the parked fetcher: a sharded queue's local doorbell, or a
        plain queue's doorbell list in Valkey (it never raises)."""
        self._parking.ring()

    def _delay(self, job: Job, asked=None) -> int:
        """The retry delay: the handler's ``Retry.delay_ms`` when it is a valid
        integer, else the backoff's (else the default backoff's): a bad value
        must cost neither the job nor a thread."""
        if asked is not None:
            if _valid_delay(asked):
                return asked
            log.warning("consumer %s: %s asked for a retry after %r ms, not an integer in [0, %d]; "
                        "using the backoff", self.name, job.id, asked, MAX_MS)
        try:
            delay = self.backoff(job.attempts)
        except Exception:
            log.exception("consumer %s: the backoff failed; using the default", self.name)
            delay = None
        return delay if _valid_delay(delay) else _DEFAULT_BACKOFF(job.attempts)

    def _handle_many(self, jobs: list[Job]) -> list[_Outcome]:
        try:
            results = list(self.handler_many(jobs))
            if len(results) != len(jobs):
                raise TypeError(f"handler_many returned {len(results)} results for {len(jobs)} jobs")
        except BaseException as exc:  # as in _handle: the handler's failure is data
            results = [exc] * len(jobs)
        return [self._handle(job, _raiser(res)) for job, res in zip(jobs, results)]

    def _handle(self, job: Job, handler=None) -> _Outcome:
        try:
            (handler or self.handler)(job)
        except BaseException as exc:
            return self._failed(job, exc)
        return _Outcome(job, "complete")

    def _failed(self, job: Job, exc: BaseException) -> _Outcome:
        """The outcome of a handler that raised ``exc`` (any BaseException:
        a handler's SystemExit must not end the thread silently). The
        handler's failure is data, not our crash."""
        if isinstance(exc, Drop):
            return _Outcome(job, "drop", error=_safe_text(exc))
        if isinstance(exc, Retry):
            return _Outcome(job, "retry", self._delay(job, exc.delay_ms), _safe_text(exc),
                            _valid_attempts(exc.max_attempts))
        if isinstance(exc, Cancelled):
            if job.cancelled:  # cancelled, or the lease was lost: the result would be refused
                return _Outcome(job, "cancelled", error=_safe_text(exc))
            return _Outcome(job, "retry", self._delay(job), _safe_text(exc))
        tb = "".join(traceback.format_tb(exc.__traceback__, limit=8))
        return _Outcome(job, "retry", self._delay(job), f"{_safe_text(exc)}\n{tb}")

    # -- heartbeat --------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        current_queue.set(self.queue.name)
        every = self.lease_ms / 3000
        failures = 0
        while not self._hb_stop.wait(every):
            try:
                self._beat()
                failures = 0
            except CONNECTION_ERRORS:
                continue  # leases run on; the next beat tries again
            except Exception as exc:
                failures += 1
                log.exception("consumer %s: heartbeat failed (%d in a row)", self.name, failures)
                if failures >= 3:
                    self._crash("heartbeat", exc)
                    return

    def _beat(self) -> None:
        """Extend every lease in hand; a refused extend (stale, gone or
        cancelled) marks the job lost: no more extends for it, and the
        handler sees ``job.cancelled`` (its result would be refused)."""
        with self._cond:
            # finished jobs too: their acks may wait for the next cycle, and the lease must hold till then
            held = [j for j in self._in_hand.values() if j.id not in self._lost]
        if not held:
            return
        replies = self.queue.extend_many([(j.id, j.attempts) for j in held], lease_ms=self.lease_ms)
        for job, reply in zip(held, replies):
            if isinstance(reply, (StaleToken, Cancelled)) or reply == 0:
                with self._cond:
                    if job.id in self._finished or job.id not in self._in_hand:
                        continue  # its handler was done: the ack got there first, nothing was lost
                    self._lost.add(job.id)
                self.stats["lost"] += 1
                job._mark_cancelled()
                if isinstance(reply, Cancelled):
                    log.info("consumer %s: %s was cancelled; telling its handler", self.name, job.id,
                             extra={"job_id": job.id})
                else:
                    log.warning("consumer %s lost the lease of %s (reaped); its result will be refused",
                                self.name, job.id, extra={"job_id": job.id})

    # -- shutdown ---------------------------------------------------------
    def _shutdown(self) -> int:
        """Hand back unstarted jobs, let running ones finish within the grace
        period, send the last acks. Answers how many jobs were left leased."""
        with self._cond:
            self._closing = True
            threads = list(self._threads)
        unstarted = self._take_unstarted()
        for _ in threads:
            self._runq.put(None)
        if unstarted:
            self._release(unstarted)
        try:  # the acks waiting now, before the grace for the jobs still running
            self._cycle(claim=False)
        except CONNECTION_ERRORS:
            pass  # sent again below
        except Exception as exc:
            self._crash("fetcher (acks at the stop)", exc)
        deadline = time.monotonic() + self.grace_ms / 1000
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._cond:  # started by one of those (a late _grow) before it ended: they end at once
            late = self._threads[len(threads):]
        for t in late:
            t.join(max(0.0, deadline - time.monotonic()))
        for attempt in range(3):
            try:
                self._cycle(claim=False)
                break
            except CONNECTION_ERRORS:
                time.sleep(0.2 * (attempt + 1))
            except Exception as exc:
                self._crash("fetcher (last acks)", exc)
                break
        self._hb_stop.set()
        self._parking.close()
        with self._cond:
            return len(self._in_hand)

    def _take_unstarted(self) -> list[Job]:
        unstarted = []
        while True:
            try:
                job = self._runq.get_nowait()
            except _queue.Empty:
                break
            if job is not None and job is not _NUDGE and job is not _PARK:
                unstarted.append(job)
        for own in self._owns:
            unstarted += _take_all(own.jobs)
        return unstarted

    def _release(self, jobs: list[Job]) -> None:
        """Hand claimed, unstarted jobs back to the queue (not an attempt)."""
        try:
            batch = self.queue.batch()
            for job in jobs:
                self.queue.add_release(batch, job.id, job.attempts)
            batch.run()
            log.info("consumer %s handed back %d unstarted jobs", self.name, len(jobs))
        except CONNECTION_ERRORS:
            log.warning("consumer %s could not hand back %d jobs; the reaper will", self.name, len(jobs))
        with self._cond:
            for job in jobs:
                self._in_hand.pop(job.id, None)

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {}

        def on_signal(signum, frame):
            log.info("consumer %s got %s: finishing jobs in hand", self.name, signal.Signals(signum).name)
            self.stop()

        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)

        def restore():
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore
