import { Type } from '@sinclair/typebox'
import { KeyError, type KeyInfo, type KeyStore } from '../catalog/keys.js'
import { DomainError } from '../core/errors.js'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { route, type RouteDef } from './route.js'
import type { CallStore } from '../calls/store.js'
import type { Rollups } from '../stats/rollups.js'
import type { IngestPool } from '../calls/ingest-pool.js'

const KeyInfoSchema = Type.Object({
  key_id: Type.String(),
  name: Type.String(),
  user_id: Type.String({ description: 'Becomes svc_user_id on everything written with this key' }),
  entities: Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'null: every entity' }),
  is_admin: Type.Boolean(),
  prefix: Type.String({ description: 'The first characters of the key, to recognise it' }),
  created_at: Type.String({ format: 'date-time' }),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})

const KeyCreateReqSchema = Type.Object(
  {
    user_id: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.@-]+$' }),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    entities: Type.Optional(
      Type.Union([
        Type.Array(Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.-]+$' }), { minItems: 1, maxItems: 1000 }),
        Type.Null(),
      ]),
    ),
    is_admin: Type.Optional(Type.Boolean({ default: false })),
  },
  { additionalProperties: false },
)

export function keyInfoJson(i: KeyInfo) {
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

/** API key management for admins (`weft keys` uses these when a server holds the catalog), and process stats. */
export function adminRoutes(
  keys: KeyStore,
  calls: CallStore,
  ingest?: IngestPool,
  inFlight?: () => number,
  rollups?: Rollups,
  inference?: () => Promise<unknown>,
): RouteDef[] {
  // Event-loop delay since start (or the last reset).
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS })
  eld.enable()
  return [
    route({
      method: 'GET',
      path: '/admin/stats',
      family: 'trace',
      auth: 'admin',
      tags: ['Admin'],
      summary: 'Event-loop delay, memory and calls-store state (`?reset=true` restarts the delay histogram)',
      query: Type.Object({ reset: Type.Optional(Type.Boolean()) }),
      handler: async (ctx) => {
        const mem = process.memoryUsage()
        const body = {
          event_loop_delay_ms: {
            p50: delayMs(eld.percentile(50)),
            p99: delayMs(eld.percentile(99)),
            max: delayMs(eld.max),
            samples: eld.count,
            resolution_ms: ELD_RESOLUTION_MS,
          },
          memory: { rss_bytes: mem.rss, heap_used_bytes: mem.heapUsed, external_bytes: mem.external },
          calls: calls.stats(),
          ingest: ingest?.stats ?? null,
          // Statistics pre-aggregates: built yet, how (loaded or rebuilt), and up to which part.
          rollups: rollups
            ? { ready: rollups.ready, origin: rollups.origin, x: rollups.x, parts_past_x: Math.max(0, calls.lastSeq - rollups.x) }
            : null,
          /** Requests being handled, this one included. */
          in_flight: inFlight?.() ?? null,
          // Per served model: its backend, requests running and waiting, KV-cache positions in use.
          inference: inference ? await inference() : null,
        }
        if (ctx.query.reset) eld.reset()
        return { body }
      },
    }),
    route({
      method: 'POST',
      path: '/admin/keys',
      family: 'trace',
      auth: 'admin',
      tags: ['Admin'],
      summary: 'Create an API key (the key is returned once)',
      body: KeyCreateReqSchema,
      response: { description: 'The new key', schema: Type.Object({ key: Type.String(), info: KeyInfoSchema }) },
      handler: async (ctx) => {
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
      },
    }),
    route({
      method: 'GET',
      path: '/admin/keys',
      family: 'trace',
      auth: 'admin',
      tags: ['Admin'],
      summary: 'List API keys (never the keys themselves)',
      response: { description: 'Keys', schema: Type.Object({ keys: Type.Array(KeyInfoSchema) }) },
      handler: async () => ({ body: { keys: (await keys.list()).map(keyInfoJson) } }),
    }),
    route({
      method: 'DELETE',
      path: '/admin/keys/{key_id}',
      family: 'trace',
      auth: 'admin',
      tags: ['Admin'],
      summary: 'Revoke an API key',
      response: { description: 'The revoked key', schema: KeyInfoSchema },
      handler: async (ctx) => {
        const info = await keys.revoke(ctx.params.key_id!)
        if (!info) throw new DomainError(404, `No API key with id ${JSON.stringify(ctx.params.key_id)}`)
        return { body: keyInfoJson(info) }
      },
    }),
  ]
}
