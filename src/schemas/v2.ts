import { Type, type Static } from '@sinclair/typebox'
import { Nullable, PROJECT_PART_PATTERN, timestamp } from './common.js'

// ---- path parameters (decoded segments) ----

const segment = (description: string) => Type.String({ minLength: 1, description })
const projectPart = (description: string) => Type.String({ pattern: `^${PROJECT_PART_PATTERN}$`, maxLength: 128, description })

export const EntityProjectParamsSchema = Type.Object({
  entity: projectPart('Entity (user or team)'),
  project: projectPart('Project name'),
})
export type EntityProjectParams = Static<typeof EntityProjectParamsSchema>

export const ObjectParamsSchema = Type.Composite([EntityProjectParamsSchema, Type.Object({ object_id: segment('Object id') })])
export type ObjectParams = Static<typeof ObjectParamsSchema>

export const ObjectVersionParamsSchema = Type.Composite([ObjectParamsSchema, Type.Object({ digest: segment('Version digest') })])
export type ObjectVersionParams = Static<typeof ObjectVersionParamsSchema>

export const PredictionParamsSchema = Type.Composite([EntityProjectParamsSchema, Type.Object({ prediction_id: segment('Prediction id') })])
export type PredictionParams = Static<typeof PredictionParamsSchema>

// ---- query strings (validated with coerceTypes: 'array'; unknown parameters are ignored, as FastAPI does) ----

/** GET /v2/{entity}/{project}/ops/{object_id}/versions/{digest} */
export const OpVersionQuerySchema = Type.Object({
  eager: Type.Optional(Type.Boolean({ default: false, description: 'Whether to eagerly load the op code' })),
})
export type OpVersionQuery = Static<typeof OpVersionQuerySchema>

/** GET /v2/{entity}/{project}/evaluations and /scorers (upstream's code reads limit/offset; its 2026-07 OpenAPI omits them). */
export const ListQuerySchema = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 0, description: 'Maximum number of items to return' })),
  offset: Type.Optional(Type.Integer({ minimum: 0, description: 'Number of items to skip' })),
})
export type ListQuery = Static<typeof ListQuerySchema>

/** DELETE /v2/{entity}/{project}/evaluations/{object_id}?digests=a&digests=b */
export const EvaluationDeleteQuerySchema = Type.Object({
  digests: Type.Optional(
    Type.Array(Type.String({ minLength: 1 }), {
      description: 'Digests to delete (repeat the parameter); when not provided, all versions of the evaluation are deleted',
    }),
  ),
})
export type EvaluationDeleteQuery = Static<typeof EvaluationDeleteQuerySchema>

/** DELETE /v2/{entity}/{project}/predictions?prediction_ids=a&prediction_ids=b */
export const PredictionsDeleteQuerySchema = Type.Object({
  prediction_ids: Type.Array(Type.String({ minLength: 1 }), {
    minItems: 1,
    description: 'Prediction ids to delete (repeat the parameter)',
  }),
})
export type PredictionsDeleteQuery = Static<typeof PredictionsDeleteQuerySchema>

// ---- bodies and records ----

/** POST /v2/{entity}/{project}/datasets */
export const DatasetCreateReqSchema = Type.Object(
  {
    // Upstream makes the name optional (object id then defaults to `Dataset`).
    name: Type.Optional(
      Nullable(Type.String({ minLength: 1, maxLength: 128 }), {
        description: 'Name of the dataset; datasets with the same name are versioned together',
      }),
    ),
    description: Type.Optional(Nullable(Type.String(), { description: 'Description of the dataset' })),
    rows: Type.Array(Type.Record(Type.String(), Type.Unknown()), { description: 'Dataset rows, each an object' }),
  },
  { additionalProperties: false, description: 'Create a dataset' },
)
export type DatasetCreateReq = Static<typeof DatasetCreateReqSchema>

export const DatasetCreateResSchema = Type.Object({
  digest: Type.String({ description: 'Digest of the created dataset version' }),
  object_id: Type.String({ description: 'Id of the dataset' }),
  version_index: Type.Integer({ minimum: 0, description: 'Version index of the created dataset' }),
})
export type DatasetCreateRes = Static<typeof DatasetCreateResSchema>

/** GET /v2/{entity}/{project}/predictions/{prediction_id} */
export const PredictionSchema = Type.Object({
  prediction_id: Type.String(),
  model: Type.String({ description: 'Model reference, a weave:/// URI' }),
  inputs: Type.Record(Type.String(), Type.Unknown(), { description: 'Inputs of the prediction' }),
  output: Type.Unknown({ description: 'Output of the prediction' }),
  evaluation_run_id: Type.Optional(Nullable(Type.String(), { description: 'Set when the prediction is linked to an evaluation run' })),
  svc_user_id: Type.Optional(Nullable(Type.String(), { description: 'Set by the server' })),
})
export type Prediction = Static<typeof PredictionSchema>

/** What identifies one version of a versioned object in every v2 read. */
const versionFields = {
  object_id: Type.String(),
  digest: Type.String(),
  version_index: Type.Integer({ minimum: 0 }),
  created_at: timestamp(),
}

/** GET /v2/{entity}/{project}/ops/{object_id}/versions/{digest} */
export const OpVersionSchema = Type.Object({
  ...versionFields,
  code: Type.String({ description: 'Source code of the op; loaded eagerly only when requested' }),
})
export type OpVersion = Static<typeof OpVersionSchema>

const ref = (description: string) => Type.String({ description: `${description} (weave:/// URI)` })
const optRef = (description: string) => Type.Optional(Nullable(ref(description)))

/** Upstream `EvaluationReadRes`: one line of the GET /v2/{entity}/{project}/evaluations listing. */
export const EvaluationSchema = Type.Object({
  ...versionFields,
  name: Type.String(),
  description: Type.Optional(Nullable(Type.String())),
  dataset: ref('Dataset reference'),
  scorers: Type.Array(Type.String(), { description: 'Scorer references (weave:/// URIs)' }),
  trials: Type.Integer({ description: 'Number of trials' }),
  evaluation_name: Type.Optional(Nullable(Type.String(), { description: 'Name for the evaluation run' })),
  evaluate_op: optRef('Evaluate op reference'),
  predict_and_score_op: optRef('Predict-and-score op reference'),
  summarize_op: optRef('Summarize op reference'),
})
export type Evaluation = Static<typeof EvaluationSchema>

/** Upstream `ScorerReadRes`: one line of the GET /v2/{entity}/{project}/scorers listing. */
export const ScorerSchema = Type.Object({
  ...versionFields,
  name: Type.String(),
  description: Type.Optional(Nullable(Type.String())),
  score_op: Type.String({ description: 'The Scorer.score op reference' }),
})
export type Scorer = Static<typeof ScorerSchema>

/** Listings are JSONL (`application/jsonl`, one item per line); these arrays document the items. */
export const EvaluationListSchema = Type.Array(EvaluationSchema, { description: 'application/jsonl: one evaluation version per line' })
export type EvaluationList = Static<typeof EvaluationListSchema>

export const ScorerListSchema = Type.Array(ScorerSchema, { description: 'application/jsonl: one scorer version per line' })
export type ScorerList = Static<typeof ScorerListSchema>
