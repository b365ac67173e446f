import { Type, type Static } from '@sinclair/typebox'

/** A piece of long work (log replay, rollup build, compaction, model load) as /admin/stats and /ready report it. */
export const TaskStateSchema = Type.Object({
  id: Type.Integer(),
  name: Type.String({ description: 'e.g. `calls log replay`, `rollups warm-up`, `calls compaction`, `model load <name>`' }),
  unit: Type.String({ description: 'What done/total count: records, ranges, steps' }),
  done: Type.Number(),
  total: Type.Union([Type.Number(), Type.Null()], { description: 'Null while the size of the work is unknown' }),
  percent: Type.Union([Type.Number(), Type.Null()]),
  eta_s: Type.Union([Type.Number(), Type.Null()], { description: 'Seconds left at the rate so far' }),
  started_at: Type.String({ format: 'date-time' }),
  elapsed_s: Type.Number(),
  warming: Type.Boolean({ description: 'The server is not ready while a warming task runs' }),
  state: Type.Union([Type.Literal('running'), Type.Literal('done'), Type.Literal('failed')]),
  error: Type.Optional(Type.String()),
})
export type TaskStateJson = Static<typeof TaskStateSchema>

/** GET /ready (and /health?ready=1): 200 when nothing is warming up, else 503 with what is. */
export const ReadySchema = Type.Object({
  ready: Type.Boolean(),
  warming: Type.Array(TaskStateSchema),
})

/** GET /health: `ready=1` makes it the readiness check. */
export const HealthQuerySchema = Type.Object({
  ready: Type.Optional(
    Type.Union([Type.Literal('1'), Type.Literal('true'), Type.Literal('0'), Type.Literal('false')], {
      description: 'Answer as GET /ready does (503 while warming up)',
    }),
  ),
})
export type HealthQuery = Static<typeof HealthQuerySchema>
