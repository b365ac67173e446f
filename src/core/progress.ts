import type { Logger } from 'pino'
import { createLogger } from './log.js'

/**
 * At most one progress line per task this often: a replay of 100M parts must not flood the log.
 * `WEFT_PROGRESS_LOG_MS` changes it (tests make it short to see lines of a short replay).
 */
export const LOG_EVERY_MS = Number(process.env.WEFT_PROGRESS_LOG_MS) || 5_000
/** Finished tasks kept for /admin/stats, newest last. */
const KEEP_FINISHED = 20

/** A task's state as /admin/stats and /ready report it. */
export interface TaskState {
  id: number
  name: string
  /** What done/total count: `records`, `ranges`, `bytes`, `steps`. */
  unit: string
  done: number
  /** Null while the size of the work is unknown. */
  total: number | null
  /** 0–100, one decimal; null when total is unknown. */
  percent: number | null
  /** Seconds left at the rate so far; null until something is done or while total is unknown. */
  eta_s: number | null
  started_at: string
  elapsed_s: number
  /** The server is not ready while a warming task runs (start-up replay, first rollup build, model load). */
  warming: boolean
  state: 'running' | 'done' | 'failed'
  error?: string
}

export interface TaskOptions {
  total?: number | null
  unit?: string
  warming?: boolean
  /** Extra fields for every log line of this task. */
  fields?: Record<string, unknown>
}

type Clock = () => number

/** One piece of long work being reported. Updates are cheap (a comparison): call them as often as convenient. */
export class Task {
  done = 0
  total: number | null
  readonly unit: string
  readonly warming: boolean
  readonly startedAt: number
  state: TaskState['state'] = 'running'
  error?: string
  private lastLog: number
  finishedAt?: number

  constructor(
    private readonly registry: Progress,
    readonly id: number,
    readonly name: string,
    opts: TaskOptions,
    readonly fields: Record<string, unknown>,
  ) {
    this.total = opts.total ?? null
    this.unit = opts.unit ?? 'steps'
    this.warming = opts.warming ?? false
    this.startedAt = registry.now()
    this.lastLog = this.startedAt
  }

  /** Sets how much is done (and, when it becomes known or changes, the total). */
  update(done: number, total?: number | null): void {
    this.done = done
    if (total !== undefined) this.total = total
    const now = this.registry.now()
    if (now - this.lastLog < this.registry.logEveryMs) return
    this.lastLog = now
    this.registry.logLine(this, 'progress')
  }

  advance(n = 1): void {
    this.update(this.done + n)
  }

  finish(): void {
    if (this.state !== 'running') return
    if (this.total !== null) this.done = this.total
    this.state = 'done'
    this.finishedAt = this.registry.now()
    this.registry.finished(this)
  }

  fail(err: unknown): void {
    if (this.state !== 'running') return
    this.state = 'failed'
    this.error = err instanceof Error ? err.message : String(err)
    this.finishedAt = this.registry.now()
    this.registry.finished(this)
  }

  /** Runs fn as this task: finished when it resolves, failed (and rethrown) when it throws. */
  async run<T>(fn: (task: Task) => Promise<T>): Promise<T> {
    try {
      const out = await fn(this)
      this.finish()
      return out
    } catch (e) {
      this.fail(e)
      throw e
    }
  }

  snapshot(): TaskState {
    const now = this.finishedAt ?? this.registry.now()
    const elapsed = (now - this.startedAt) / 1000
    const percent = this.total ? Math.min(100, Math.round((this.done / this.total) * 1000) / 10) : this.total === 0 ? 100 : null
    return {
      id: this.id,
      name: this.name,
      unit: this.unit,
      done: this.done,
      total: this.total,
      percent,
      eta_s: this.state === 'running' ? eta(elapsed, this.done, this.total) : 0,
      started_at: new Date(this.startedAt).toISOString(),
      elapsed_s: Math.round(elapsed * 10) / 10,
      warming: this.warming,
      state: this.state,
      ...(this.error !== undefined ? { error: this.error } : {}),
    }
  }
}

/** Seconds left if the rest goes at the average rate so far. */
export function eta(elapsedS: number, done: number, total: number | null): number | null {
  if (total === null || done <= 0 || elapsedS <= 0) return null
  return Math.round(((elapsedS * Math.max(0, total - done)) / done) * 10) / 10
}

/**
 * The registry of long work in this process (start-up log replay, rollup builds, compactions, model
 * loads): each task logs a line with its percent done and an estimate at most every LOG_EVERY_MS,
 * and /admin/stats and /ready read their state. One per process (`progress`), like the logger.
 */
export class Progress {
  private readonly running = new Map<number, Task>()
  private readonly recent: Task[] = []
  private nextId = 1
  private log?: Logger

  constructor(
    readonly now: Clock = Date.now,
    readonly logEveryMs = LOG_EVERY_MS,
    log?: Logger,
  ) {
    this.log = log
  }

  /** The logger progress lines go to (the server's own); without one, a logger of its own at WEFT_LOG_LEVEL. */
  useLogger(log: Logger): void {
    this.log = log
  }

  private logger(): Logger {
    return (this.log ??= createLogger(process.env.WEFT_LOG_LEVEL || 'info'))
  }

  start(name: string, opts: TaskOptions = {}): Task {
    const task = new Task(this, this.nextId++, name, opts, opts.fields ?? {})
    this.running.set(task.id, task)
    this.logLine(task, 'started')
    return task
  }

  /** @internal */
  finished(task: Task): void {
    this.running.delete(task.id)
    this.recent.push(task)
    if (this.recent.length > KEEP_FINISHED) this.recent.shift()
    this.logLine(task, task.state === 'done' ? 'finished' : 'failed')
  }

  /** @internal One line: `<name>: <what> 42.0% (420/1000 records), ETA 12 s`. */
  logLine(task: Task, what: 'started' | 'progress' | 'finished' | 'failed'): void {
    const s = task.snapshot()
    const pct = s.percent === null ? '' : ` ${s.percent.toFixed(1)}%`
    const count = ` (${s.done}${s.total === null ? '' : '/' + s.total} ${s.unit})`
    const tail = what === 'progress' && s.eta_s !== null ? `, ETA ${s.eta_s} s` : what === 'started' ? '' : `, ${s.elapsed_s} s`
    const fields = { task: s.name, done: s.done, total: s.total, percent: s.percent, eta_s: s.eta_s, ...task.fields }
    const msg = `${s.name}: ${what}${what === 'started' ? '' : pct + count}${tail}`
    if (what === 'failed') this.logger().warn({ ...fields, err: s.error }, msg)
    else this.logger().info(fields, msg)
  }

  /** Tasks running now, oldest first. */
  tasks(): TaskState[] {
    return [...this.running.values()].map((t) => t.snapshot())
  }

  /** Tasks finished lately (done or failed), oldest first. */
  finishedTasks(): TaskState[] {
    return this.recent.map((t) => t.snapshot())
  }

  /** Running tasks the server is not ready without. */
  warming(): TaskState[] {
    return this.tasks().filter((t) => t.warming)
  }
}

/** This process's registry. */
export const progress = new Progress()
