import { Type, type Static } from '@sinclair/typebox'
import { Nullable, ProjectIdSchema, timestamp, timestampIn } from './common.js'
import { PredictionSchema } from './v2.js'

/**
 * The call-backed half of the /v2 project API: evaluation runs, predictions, scores and
 * `calls/complete`. Bodies are closed (unknown fields are a 422); the call payloads inside
 * `calls/complete` accept extras, as the other call writes do.
 */

const ref = (description: string) => Type.String({ minLength: 1, maxLength: 2048, description: `${description} (weave:/// URI)` })
const id = (description: string) => Type.String({ minLength: 1, maxLength: 128, description })
const optId = (description: string) => Type.Optional(Nullable(id(description)))
const idList = (description: string, minItems = 0) =>
  Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { minItems, description: `${description} (repeat the parameter)` })
const page = {
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Maximum number of items to return' })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Number of items to skip' })),
}

// ---- evaluation runs ----

/** POST /v2/{entity}/{project}/evaluation_runs */
export const EvaluationRunCreateReqSchema = Type.Object(
  {
    evaluation: ref('The evaluation'),
    model: ref('The model'),
    source_evaluation_run_id: optId('The run this one re-scores, kept as a provenance link'),
  },
  { additionalProperties: false, description: 'Start an evaluation run' },
)
export type EvaluationRunCreateReq = Static<typeof EvaluationRunCreateReqSchema>

export const EvaluationRunCreateResSchema = Type.Object({ evaluation_run_id: Type.String() })

/** One evaluation run: GET …/evaluation_runs/{id}, and one line of the listing. */
export const EvaluationRunSchema = Type.Object({
  evaluation_run_id: Type.String(),
  evaluation: Type.String({ description: 'Evaluation reference' }),
  model: Type.String({ description: 'Model reference' }),
  status: Nullable(Type.String({ description: '`running` (not finished), `completed` or `failed` (finished with an exception)' })),
  started_at: Nullable(timestamp()),
  finished_at: Nullable(timestamp()),
  summary: Nullable(Type.Record(Type.String(), Type.Unknown())),
  source_evaluation_run_id: Nullable(Type.String()),
})
export type EvaluationRun = Static<typeof EvaluationRunSchema>

export const EvaluationRunListSchema = Type.Array(EvaluationRunSchema, { description: 'application/jsonl: one run per line' })

/** GET …/evaluation_runs?evaluations=a&models=b&evaluation_run_ids=c&limit=&offset= */
export const EvaluationRunListQuerySchema = Type.Object({
  evaluations: Type.Optional(idList('Only runs of these evaluation refs')),
  models: Type.Optional(idList('Only runs of these model refs')),
  evaluation_run_ids: Type.Optional(idList('Only these runs')),
  ...page,
})
export type EvaluationRunListQuery = Static<typeof EvaluationRunListQuerySchema>

/** DELETE …/evaluation_runs?evaluation_run_ids=a&evaluation_run_ids=b */
export const EvaluationRunsDeleteQuerySchema = Type.Object({
  evaluation_run_ids: idList('Runs to delete, with every call under them', 1),
})
export type EvaluationRunsDeleteQuery = Static<typeof EvaluationRunsDeleteQuerySchema>

/** POST …/evaluation_runs/{id}/finish */
export const EvaluationRunFinishReqSchema = Type.Object(
  { summary: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()), { description: "The run call's summary" })) },
  { additionalProperties: false },
)
export type EvaluationRunFinishReq = Static<typeof EvaluationRunFinishReqSchema>

export const SuccessSchema = Type.Object({ success: Type.Boolean() })

// ---- predictions (the record and the delete query are in v2.ts) ----

const GenAISpanRefSchema = Type.Object({ trace_id: Type.String({ maxLength: 256 }), span_id: Type.String({ maxLength: 256 }) })

/** POST …/predictions */
export const PredictionCreateReqSchema = Type.Object(
  {
    model: ref('The model'),
    inputs: Type.Record(Type.String(), Type.Unknown(), { description: 'Inputs of the prediction' }),
    output: Type.Unknown({ description: 'Output of the prediction' }),
    evaluation_run_id: optId('The run this prediction belongs to'),
    genai_span_ref: Type.Optional(
      Nullable(Type.Array(GenAISpanRefSchema, { maxItems: 100 }), { description: 'Spans the prediction made' }),
    ),
  },
  { additionalProperties: false, description: 'Record a prediction' },
)
export type PredictionCreateReq = Static<typeof PredictionCreateReqSchema>

export const PredictionCreateResSchema = Type.Object({ prediction_id: Type.String() })

/** GET …/predictions and …/scores: optionally those of one run. */
export const RunItemsListQuerySchema = Type.Object({
  evaluation_run_id: Type.Optional(id('Only those of this run')),
  ...page,
})
export type RunItemsListQuery = Static<typeof RunItemsListQuerySchema>

// ---- scores ----

/** POST …/scores */
export const ScoreCreateReqSchema = Type.Object(
  {
    prediction_id: id('The scored prediction'),
    scorer: ref('The scorer, an object ref'),
    value: Type.Unknown({ description: 'What the scorer returned' }),
    evaluation_run_id: optId('The run this score belongs to'),
  },
  { additionalProperties: false, description: 'Record a score of a prediction' },
)
export type ScoreCreateReq = Static<typeof ScoreCreateReqSchema>

export const ScoreCreateResSchema = Type.Object({ score_id: Type.String() })

export const ScoreSchema = Type.Object({
  score_id: Type.String(),
  scorer: Type.String({ description: 'Scorer reference' }),
  value: Type.Unknown({ description: 'The score; 0.0 when none was stored' }),
  evaluation_run_id: Nullable(Type.String()),
  svc_user_id: Nullable(Type.String({ description: 'Set by the server' })),
})
export type Score = Static<typeof ScoreSchema>

export const ScoreListSchema = Type.Array(ScoreSchema, { description: 'application/jsonl: one score per line' })

/** DELETE …/scores?score_ids=a&score_ids=b */
export const ScoresDeleteQuerySchema = Type.Object({ score_ids: idList('Scores to delete', 1) })
export type ScoresDeleteQuery = Static<typeof ScoresDeleteQuerySchema>

// ---- calls/complete ----

const Obj = (description: string) => Type.Record(Type.String(), Type.Unknown(), { description })

/** A call sent whole, start and end together (upstream `CompletedCallSchemaForInsert`). */
export const CompletedCallSchema = Type.Object({
  project_id: ProjectIdSchema,
  id: id('16 lowercase hex digits or a lowercase UUID'),
  trace_id: id('32 lowercase hex digits or a lowercase UUID'),
  op_name: Type.String({ minLength: 1, maxLength: 2048 }),
  started_at: timestampIn(),
  ended_at: timestampIn(),
  display_name: Type.Optional(Nullable(Type.String({ maxLength: 1024 }))),
  parent_id: optId('The parent call id'),
  thread_id: Type.Optional(Nullable(Type.String({ maxLength: 256 }))),
  turn_id: Type.Optional(Nullable(Type.String({ maxLength: 256 }))),
  attributes: Obj('Attributes of the call'),
  inputs: Obj('Inputs of the call'),
  output: Type.Optional(Type.Unknown()),
  summary: Obj('Summary; `usage` holds token counts per model'),
  otel_dump: Type.Optional(Nullable(Obj('Accepted and not kept'))),
  exception: Type.Optional(Nullable(Type.String())),
  svc_user_id: Type.Optional(Nullable(Type.String({ description: 'Ignored: the server sets the caller' }))),
  wb_user_id: Type.Optional(Nullable(Type.String({ description: 'Ignored: the server sets the caller' }))),
  svc_run_id: Type.Optional(Nullable(Type.String({ maxLength: 512 }))),
  wb_run_id: Type.Optional(Nullable(Type.String({ maxLength: 512 }))),
  svc_run_step: Type.Optional(Nullable(Type.Integer())),
  wb_run_step: Type.Optional(Nullable(Type.Integer())),
  svc_run_step_end: Type.Optional(Nullable(Type.Integer())),
  wb_run_step_end: Type.Optional(Nullable(Type.Integer())),
})
export type CompletedCall = Static<typeof CompletedCallSchema>

/** POST /v2/{entity}/{project}/calls/complete */
export const CallsCompleteReqSchema = Type.Object(
  { batch: Type.Array(CompletedCallSchema, { maxItems: 10_000, description: 'Calls of this project, each started and ended' }) },
  { additionalProperties: false },
)
export type CallsCompleteReq = Static<typeof CallsCompleteReqSchema>

export const CallsCompleteResSchema = Type.Object({}, { description: 'Empty' })

export const PredictionListSchema = Type.Array(PredictionSchema, { description: 'application/jsonl: one prediction per line' })
