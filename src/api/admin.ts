import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
import { backgroundPriority } from '../core/thread-priority.js'
import { KeyError, type KeyInfo, type KeyStore } from '../catalog/keys.js'
import { duckdbMemory } from '../core/duckdb-memory.js'
import { DomainError } from '../core/errors.js'
import { progress } from '../core/progress.js'
import { route, type Ctx, type Reply, type RouteDef } from './route.js'
import type { CallStore } from '../calls/store.js'
import type { Rollups } from '../stats/rollups.js'
import type { IngestPool } from '../calls/ingest/pool.js'
import type { StorageInfo } from '../schemas/meta.js'
import {
  AdminStatsQuerySchema,
  KeyCreateReqSchema,
  KeyCreateResSchema,
  KeyInfoSchema,
  KeyListResSchema,
  type AdminStatsQuery,
  type KeyCreateReq,
  type KeyInfoJson,
} from '../schemas/admin.js'

export function keyInfoJson(i: KeyInfo): KeyInfoJson {
  return {
    key_id: i.keyId,
    name: i.name,
    user_id: i.userId,
    entities: i.entities,
    is_admin: i.isAdmin,
    prefix: i.prefix,
    created_at: i.createdAt,
    revoked_at: i.revokedAt,
  }
}

const ELD_RESOLUTION_MS = 2
/**
 * The histogram records the time between its timer's ticks, the sampling interval included (its
 * median sits at the resolution on an idle loop): the delay is what exceeds the interval.
 */
const delayMs = (ns: number) => Math.max(0, Math.round(ns / 1e4) / 100 - ELD_RESOLUTION_MS)

/** What the admin routes read: the key store, and the parts of the process /admin/stats reports on. */
export interface AdminDeps {
  keys: KeyStore
  /** The embedded calls store; absent when calls live in ClickHouse. */
  calls?: CallStore
  /** Where calls are kept (and ClickHouse's version). */
  storage?: StorageInfo
  ingest?: IngestPool
  /** Requests being handled. */
  inFlight?: () => number
  rollups?: Rollups
  /** Per served model: its backend, requests running and waiting, KV-cache positions in use. */
  inference?: () => Promise<unknown>
}

/** GET /admin/stats: event-loop delay since start (or the last reset), memory, and the stores' state. */
function processStats(d: AdminDeps, eld: IntervalHistogram) {
  return async (ctx: Ctx<unknown, AdminStatsQuery>): Promise<Reply> => {
    const mem = process.memoryUsage()
    const { calls, rollups } = d
    const body = {
      event_loop_delay_ms: {
        p50: delayMs(eld.percentile(50)),
        p99: delayMs(eld.percentile(99)),
        max: delayMs(eld.max),
        samples: eld.count,
        resolution_ms: ELD_RESOLUTION_MS,
      },
      // The nice value the server's other threads run at, so the event loop gets a core first (0: off).
      background_priority: { ...backgroundPriority() },
      // DuckDB's figures per instance (limit, in memory, spilled) beside the process's: what holds the RSS.
      memory: { rss_bytes: mem.rss, heap_used_bytes: mem.heapUsed, external_bytes: mem.external, duckdb: await duckdbMemory() },
      storage: d.storage ?? { backend: 'embedded' },
      calls: calls ? calls.stats() : null,
      ingest: d.ingest?.stats ?? null,
      // Statistics pre-aggregates: built yet, how (loaded or rebuilt), and up to which part.
      rollups:
        rollups && calls
          ? {
              ready: rollups.ready,
              origin: rollups.origin,
              x: rollups.x,
              parts_past_x: Math.max(0, calls.lastSeq - rollups.x),
              // Catch-ups on the tail that reads set off (src/stats/rollups.ts, wanted): count, total and longest ms.
              catch_ups: rollups.catchUps.json(),
              // Statistics reads and the commits they hold (src/stats/commit-gate.ts).
              gate: rollups.gate.stats(),
              // Since start or the last reset: the advances' steps, commits and folds, and the gate's waits either way.
              timings_ms: {
                ...Object.fromEntries(Object.entries(rollups.timings).map(([k, d]) => [k, d.json()])),
                gate_read_waits: rollups.gate.waits.reads.json(),
                gate_commit_waits: rollups.gate.waits.commits.json(),
              },
            }
          : null,
      /** Requests being handled, this one included. */
      in_flight: d.inFlight?.() ?? null,
      // Per served model: its backend, requests running and waiting, KV-cache positions in use.
      inference: d.inference ? await d.inference() : null,
      // Long work (log replay, rollup builds, compactions, model loads): running, and the last few finished.
      tasks: { running: progress.tasks(), finished: progress.finishedTasks() },
      warming: progress.warming().map((t) => t.name),
    }
    if (ctx.query.reset) {
      eld.reset()
      calls?.resetTimings()
      if (rollups) for (const d of [...Object.values(rollups.timings), ...Object.values(rollups.gate.waits)]) d.reset()
    }
    return { body }
  }
}

function createKey(keys: KeyStore) {
  return async (ctx: Ctx<KeyCreateReq>): Promise<Reply> => {
    try {
      const { key, info } = await keys.create({
        userId: ctx.body.user_id,
        name: ctx.body.name,
        entities: ctx.body.entities ?? null,
        isAdmin: ctx.body.is_admin ?? false,
      })
      return { body: { key, info: keyInfoJson(info) } }
    } catch (e) {
      if (e instanceof KeyError) throw new DomainError(400, e.message)
      throw e
    }
  }
}

function listKeys(keys: KeyStore) {
  return async (): Promise<Reply> => ({ body: { keys: (await keys.list()).map(keyInfoJson) } })
}

function revokeKey(keys: KeyStore) {
  return async (ctx: Ctx): Promise<Reply> => {
    const info = await keys.revoke(ctx.params.key_id!)
    if (!info) throw new DomainError(404, `No API key with id ${JSON.stringify(ctx.params.key_id)}`)
    return { body: keyInfoJson(info) }
  }
}

/** API key management for admins (`weft keys` uses these when a server holds the catalog), and process stats. */
export function adminRoutes(d: AdminDeps): RouteDef[] {
  // Event-loop delay since start (or the last reset).
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS })
  eld.enable()
  const admin = { family: 'trace' as const, auth: 'admin' as const, tags: ['Admin'] }
  return [
    route({
      ...admin,
      method: 'GET',
      path: '/admin/stats',
      summary: "Event-loop delay, memory and calls-store state (`?reset=true` restarts the delay histogram and the calls store's timings)",
      query: AdminStatsQuerySchema,
      handler: processStats(d, eld),
    }),
    route({
      ...admin,
      method: 'POST',
      path: '/admin/keys',
      summary: 'Create an API key (the key is returned once)',
      body: KeyCreateReqSchema,
      response: { description: 'The new key', schema: KeyCreateResSchema },
      handler: createKey(d.keys),
    }),
    route({
      ...admin,
      method: 'GET',
      path: '/admin/keys',
      summary: 'List API keys (never the keys themselves)',
      response: { description: 'Keys', schema: KeyListResSchema },
      handler: listKeys(d.keys),
    }),
    route({
      ...admin,
      method: 'DELETE',
      path: '/admin/keys/{key_id}',
      summary: 'Revoke an API key',
      response: { description: 'The revoked key', schema: KeyInfoSchema },
      handler: revokeKey(d.keys),
    }),
  ]
}
