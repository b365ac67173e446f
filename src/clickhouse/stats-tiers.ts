import type { CallFilter } from '../calls/model.js'

/**
 * Which hourly rollups a request reads. `op`: keyed by (project, hour, op, root or not) — migrations 4
 * and 5; `user`: the same keys and the call's user and run — migration 6 (stats-user-schema.ts), read
 * only by requests filtered on users or runs, so the others keep reading the smaller op tables (the
 * embedded engine's op and user tiers, stats/rollups.ts).
 */
export type RollupTier = 'op' | 'user'

export interface TierTables {
  /** The key columns beyond (hour, op_name, is_root): every row source of a read gives them. */
  keys: readonly string[]
  calls: string
  /** Start parts before the views existed, replaced whole by a re-run (read with FINAL). */
  callsBackfill: string
  done: string
  /** Emissions before the user tier existed (migration 6), rolled up by its backfill; the op tier has none. */
  doneBackfill: string | null
  usage: string
  usageBackfill: string | null
}

export const TIERS: Record<RollupTier, TierTables> = {
  op: {
    keys: [],
    calls: 'stats_calls_hourly',
    callsBackfill: 'stats_calls_hourly_backfill',
    done: 'stats_done_hourly',
    doneBackfill: null,
    usage: 'stats_usage_hourly',
    usageBackfill: null,
  },
  user: {
    keys: ['user_id', 'run_id'],
    calls: 'stats_calls_user_hourly',
    callsBackfill: 'stats_calls_user_backfill',
    done: 'stats_done_user_hourly',
    doneBackfill: 'stats_done_user_backfill',
    usage: 'stats_usage_user_hourly',
    usageBackfill: 'stats_usage_user_backfill',
  },
}

/** `, user_id, run_id` (each prefixed by `prefix`), or nothing: a tier's extra keys in a column list. */
export function keyList(tier: RollupTier, prefix = ''): string {
  return TIERS[tier].keys.map((k) => `, ${prefix}${k}`).join('')
}

/**
 * The tier a filter's rollup read needs: `user` when it names users or runs (with the legacy spellings;
 * empty lists name none: they filter nothing, rollupDims).
 */
export function tierOf(f: CallFilter | null | undefined): RollupTier {
  return f && [f.svc_user_ids, f.wb_user_ids, f.svc_run_ids, f.wb_run_ids].some((l) => l?.length) ? 'user' : 'op'
}
