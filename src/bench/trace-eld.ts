import { getJson } from './http.js'

/** Event-loop delay (ms) as weft's /admin/stats reports it. */
export interface Eld {
  p50: number
  p99: number
  max: number
  samples: number
}

/** One interval's delay, `t` its end in seconds since the run's start. */
export interface EldSample extends Eld {
  t: number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * weft's event-loop delay over a run, read from /admin/stats and reset at each read, so each sample covers one
 * interval. Other servers (or keys that are not admin) answer no such stats: then there is nothing to sample.
 */
export class EldSampler {
  readonly series: EldSample[] = []
  private available = false

  constructor(
    private readonly baseUrl: string,
    private readonly headers: Record<string, string>,
    private readonly t0: number,
  ) {}

  private async read(): Promise<Eld | null> {
    try {
      const r = await getJson<{ event_loop_delay_ms?: Eld }>(`${this.baseUrl}/admin/stats?reset=true`, this.headers)
      const e = r.event_loop_delay_ms
      return e ? { p50: e.p50, p99: e.p99, max: e.max, samples: e.samples ?? 0 } : null
    } catch {
      return null
    }
  }

  /** The reset before the run; resolves with whether the server has the stats at all. */
  async start(): Promise<boolean> {
    this.available = (await this.read()) !== null
    return this.available
  }

  async sample(): Promise<void> {
    if (!this.available) return
    const e = await this.read()
    if (e) this.series.push({ t: (performance.now() - this.t0) / 1000, ...e })
  }

  /** Samples every `everyMs` until `state.stop`, then once more, so the last interval is covered too. */
  async loop(state: { stop: boolean }, everyMs: number): Promise<void> {
    if (!this.available) return
    let next = performance.now() + everyMs
    while (!state.stop) {
      await sleep(Math.min(100, Math.max(0, next - performance.now())))
      if (performance.now() >= next) {
        await this.sample()
        next += everyMs
      }
    }
    await this.sample()
  }

  /**
   * The run as a whole from its intervals: `max` is exact; `p99` is the worst interval's p99 (the run's p99 is at
   * most that); `p50` is the median of the intervals' p50s weighted by their samples. Null without samples.
   */
  summary(): Eld | null {
    const s = this.series.filter((x) => x.samples > 0)
    if (s.length === 0) return null
    const total = s.reduce((a, x) => a + x.samples, 0)
    let seen = 0
    const byP50 = [...s].sort((a, b) => a.p50 - b.p50)
    const p50 = byP50.find((x) => (seen += x.samples) >= total / 2)!.p50
    return { p50, p99: Math.max(...s.map((x) => x.p99)), max: Math.max(...s.map((x) => x.max)), samples: total }
  }
}
