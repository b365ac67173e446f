/**
 * Grammar lanes: worker threads, each with its own xgrammar instance, that compile grammars and
 * compute the token masks of the sequences using them. A compile is seconds of synchronous
 * WebAssembly for a large schema; in a lane it holds up neither the model's decode loop nor (when
 * another lane is free) the masks of running sequences.
 *
 * The web build of xgrammar cannot move a compiled grammar between instances (no serialisation),
 * so a grammar's matchers live in the lane that compiled it. A cached grammar is opened where it is;
 * a new one is compiled in a lane holding no live matchers, started for it if there is none (up to
 * MAX_LANES). When every lane holds live matchers the compile waits for one to be let go: the engine
 * awaits every sequence's mask each step, so a compile in such a lane would pause the whole batch.
 */
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { checkConstraintBounds } from './bounds.js'
import { workerExecArgv } from '../../core/worker-pool-options.js'
import { GrammarError, constraintKey, type Constraint, type GrammarSource, type SequenceGrammar } from './constraint.js'
import type { LaneCommand, LaneConfig, LaneReply } from './lane-protocol.js'

/** Each lane is a thread and an xgrammar instance holding the vocabulary: a few, not one per request. */
const MAX_LANES = 3
/**
 * How long a compile may take before its lane is stopped: a hostile regex or grammar must not hold a lane (and the
 * sequences waiting for one) for minutes. The web build cannot interrupt a compile, so the thread is terminated.
 */
const COMPILE_LIMIT_MS = Number(process.env.WEFT_GRAMMAR_COMPILE_TIMEOUT_MS) || 10_000
const LANE_FILE = fileURLToPath(new URL('../../../workers/grammar.js', import.meta.url))

class CompileTimeout extends Error {
  constructor(ms: number) {
    super(`The grammar took longer than ${ms / 1000} s to compile and was stopped. Simplify the schema, regex or grammar.`)
  }
}

type Pending = { resolve(r: LaneReply): void; reject(e: Error): void }
type Ask = LaneCommand extends infer C ? (C extends { id: number } ? Omit<C, 'id'> : never) : never

class Lane {
  private readonly worker: Worker
  private readonly pending = new Map<number, Pending>()
  private nextId = 1
  /** Matchers not yet disposed: sequences whose masks this lane computes. */
  live = 0
  /** Opens in flight, each of which may be compiling. */
  opening = 0
  /** Keys of the grammars its cache holds (or is compiling), mirrored from its replies. */
  readonly cached = new Set<string>()
  dead: Error | null = null

  constructor(
    config: LaneConfig,
    onDeath: (l: Lane) => void,
    /** Its last live matcher went: it may take a compile. */
    readonly onFree: () => void,
  ) {
    this.worker = new Worker(LANE_FILE, { workerData: config, execArgv: workerExecArgv() })
    this.worker.unref()
    this.ready = new Promise((resolve) => (this.markReady = resolve))
    this.worker.on('message', (r: LaneReply) => {
      if (r.op === 'ready') return this.markReady()
      const p = this.pending.get(r.id)
      this.pending.delete(r.id)
      p?.resolve(r)
    })
    this.onDeath = onDeath
    this.worker.on('error', (e) => this.die(e))
    this.worker.on('exit', (code) => this.die(new Error(`a grammar lane exited (${code})`)))
  }

  private readonly onDeath: (l: Lane) => void
  /** Resolves once the lane's xgrammar instance is loaded (or it died). */
  readonly ready: Promise<void>
  private markReady!: () => void

  private die(e: Error): void {
    if (this.dead) return
    this.dead = e
    this.markReady()
    for (const p of this.pending.values()) p.reject(e)
    this.pending.clear()
    this.onDeath(this)
  }

  /** Ends the thread now, failing what it was doing with `e`. */
  kill(e: Error): void {
    this.die(e)
    void this.worker.terminate()
  }

  ask(c: Ask): Promise<LaneReply> {
    if (this.dead) return Promise.reject(this.dead)
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.worker.postMessage({ ...c, id })
    })
  }

  tell(c: Extract<LaneCommand, { op: 'accept' | 'dispose' }>): void {
    if (!this.dead) this.worker.postMessage(c)
  }

  async close(): Promise<void> {
    await this.worker.terminate()
  }
}

/** A sequence's matcher, living in a lane. */
class LaneMatcher implements SequenceGrammar {
  private disposed = false

  constructor(
    private readonly lane: Lane,
    private readonly id: number,
  ) {}

  async nextMask(): Promise<Int32Array | null> {
    const r = await this.lane.ask({ op: 'mask', matcher: this.id })
    if (r.op === 'mask') return r.mask
    throw new Error(r.op === 'error' ? r.message : 'unexpected reply from a grammar lane')
  }

  accept(token: number): void {
    this.lane.tell({ op: 'accept', matcher: this.id, token })
  }

  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    if (--this.lane.live === 0) this.lane.onFree()
    this.lane.tell({ op: 'dispose', matcher: this.id })
  }
}

export class GrammarLanes implements GrammarSource {
  private readonly lanes: Lane[] = []
  /** Compiles waiting for a lane without live matchers. */
  private readonly waiting: (() => void)[] = []

  constructor(
    private readonly config: LaneConfig,
    private readonly maxLanes = MAX_LANES,
  ) {}

  async open(c: Constraint, stopIds: number[] | null, n: number): Promise<SequenceGrammar[]> {
    checkConstraintBounds(c)
    const key = constraintKey(c)
    let lane = this.pick(key)
    while (!lane) {
      await new Promise<void>((r) => this.waiting.push(r))
      lane = this.pick(key)
    }
    // Claimed at once, so that the same grammar asked again meanwhile waits for this compile.
    lane.cached.add(key)
    lane.opening++
    let r: LaneReply
    let timer: NodeJS.Timeout | undefined
    try {
      const reply = lane.ask({ op: 'open', constraint: c, stopIds, n })
      reply.catch(() => {}) // awaited below; a lane dying during its load must not count as unhandled meanwhile
      await lane.ready
      timer = setTimeout(() => lane.kill(new CompileTimeout(COMPILE_LIMIT_MS)), COMPILE_LIMIT_MS)
      r = await reply
    } catch (e) {
      if (e instanceof CompileTimeout) throw new GrammarError(e.message)
      throw e
    } finally {
      clearTimeout(timer)
      lane.opening--
    }
    if (r.op !== 'opened') {
      lane.cached.delete(key)
      if (r.op === 'error' && r.grammar) throw new GrammarError(r.message)
      throw new Error(r.op === 'error' ? r.message : 'unexpected reply from a grammar lane')
    }
    if (r.cleared) lane.cached.clear()
    for (const k of r.evicted) lane.cached.delete(k)
    lane.cached.add(key)
    lane.live += r.matchers.length
    return r.matchers.map((id) => new LaneMatcher(lane, id))
  }

  /**
   * The lane for a constraint: where it is cached; else an idle one without live matchers; else a
   * new one; else one without live matchers that is busy compiling. null: every lane has live matchers.
   */
  private pick(key: string): Lane | null {
    const holder = this.lanes.find((l) => l.cached.has(key))
    if (holder) return holder
    const free = this.lanes.filter((l) => l.live === 0).sort((a, b) => a.opening - b.opening)
    if (free[0] && free[0].opening === 0) return free[0]
    if (this.lanes.length < this.maxLanes) {
      const lane = new Lane(
        this.config,
        (dead) => {
          this.lanes.splice(this.lanes.indexOf(dead) >>> 0, 1)
          this.freed()
        },
        () => this.freed(),
      )
      this.lanes.push(lane)
      return lane
    }
    return free[0] ?? null
  }

  private freed(): void {
    for (const r of this.waiting.splice(0)) r()
  }

  async close(): Promise<void> {
    await Promise.all(this.lanes.splice(0).map((l) => l.close()))
  }
}
