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

/** The most items one listing page may ask for. */
export const MAX_LIST_LIMIT = 10_000

/**
 * GET /v2/{entity}/{project}/{ops,datasets,scorers,evaluations,models} (upstream's code reads limit/offset for
 * every kind; its 2026-07 OpenAPI omits them for scorers and evaluations).
 */
export const ListQuerySchema = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_LIST_LIMIT, description: 'Maximum number of items to return' })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Number of items to skip' })),
})
export type ListQuery = Static<typeof ListQuerySchema>

/** DELETE /v2/{entity}/{project}/{kind}/{object_id}?digests=a&digests=b */
export const VersionsDeleteQuerySchema = Type.Object({
  digests: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
      description: 'Digests (or `latest`, `v<N>`) to delete (repeat the parameter); when not provided, all versions are deleted',
    }),
  ),
})
export type VersionsDeleteQuery = Static<typeof VersionsDeleteQuerySchema>

/** DELETE /v2/{entity}/{project}/evaluations/{object_id}: the same parameters as every kind's delete. */
export const EvaluationDeleteQuerySchema = VersionsDeleteQuerySchema
export type EvaluationDeleteQuery = VersionsDeleteQuery

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

// ---- create bodies and read results of the versioned kinds (docs/objects.md, "The /v2 project API") ----

const nameField = (description: string) => Type.String({ minLength: 1, maxLength: 128, description })
const text = (description: string) => Type.Optional(Nullable(Type.String(), { description }))
const attributes = (description: string) => Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()), { description }))

/** Scorers one evaluation may name. */
export const MAX_EVALUATION_SCORERS = 1000
/** Trials one evaluation may ask for. */
export const MAX_EVALUATION_TRIALS = 1000

/** What every create answers (the version it made or found). */
const createdFields = {
  digest: Type.String({ description: 'Digest of the version' }),
  object_id: Type.String({ description: 'Object id (derived from the name)' }),
  version_index: Type.Integer({ minimum: 0, description: 'Version index of the version' }),
}

/** POST /v2/{entity}/{project}/ops */
export const OpCreateReqSchema = Type.Object(
  {
    name: Type.Optional(Nullable(nameField('Name of the op; ops with the same name are versioned together (default: `Op`)'))),
    source_code: text('Complete source code of the op, including imports (default: a placeholder)'),
  },
  { additionalProperties: false, description: 'Create an op' },
)
export type OpCreateReq = Static<typeof OpCreateReqSchema>

export const CreatedVersionSchema = Type.Object(createdFields)
export type CreatedVersionRes = Static<typeof CreatedVersionSchema>

/** POST /v2/{entity}/{project}/scorers */
export const ScorerCreateReqSchema = Type.Object(
  {
    name: nameField('Name of the scorer; scorers with the same name are versioned together'),
    description: text('Description of the scorer'),
    op_source_code: Type.String({ description: 'Complete source code of the Scorer.score op, including imports' }),
  },
  { additionalProperties: false, description: 'Create a scorer' },
)
export type ScorerCreateReq = Static<typeof ScorerCreateReqSchema>

export const ScorerCreateResSchema = Type.Object({ ...createdFields, scorer: Type.String({ description: 'Ref of the scorer version' }) })
export type ScorerCreateRes = Static<typeof ScorerCreateResSchema>

/** POST /v2/{entity}/{project}/evaluations */
export const EvaluationCreateReqSchema = Type.Object(
  {
    name: nameField('Name of the evaluation; evaluations with the same name are versioned together'),
    description: text('Description of the evaluation'),
    dataset: Type.String({ minLength: 1, maxLength: 2048, description: 'Ref of a dataset version of this project (weave:/// URI)' }),
    scorers: Type.Optional(
      Nullable(Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { maxItems: MAX_EVALUATION_SCORERS }), {
        description: 'Refs of scorer versions of this project (weave:/// URIs)',
      }),
    ),
    trials: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_EVALUATION_TRIALS, default: 1, description: 'Number of trials' })),
    evaluation_name: text('Name for the evaluation runs'),
    eval_attributes: attributes('Extra attributes, merged into the evaluation object'),
  },
  { additionalProperties: false, description: 'Create an evaluation' },
)
export type EvaluationCreateReq = Static<typeof EvaluationCreateReqSchema>

export const EvaluationCreateResSchema = Type.Object({
  ...createdFields,
  evaluation_ref: Type.String({ description: 'Ref of the evaluation version' }),
})
export type EvaluationCreateRes = Static<typeof EvaluationCreateResSchema>

/** POST /v2/{entity}/{project}/models */
export const ModelCreateReqSchema = Type.Object(
  {
    name: nameField('Name of the model; models with the same name are versioned together'),
    description: text('Description of the model'),
    source_code: Type.String({ description: 'Complete source code of the model class, including imports' }),
    attributes: attributes('Extra attributes, merged into the model object and read back'),
  },
  { additionalProperties: false, description: 'Create a model' },
)
export type ModelCreateReq = Static<typeof ModelCreateReqSchema>

export const ModelCreateResSchema = Type.Object({ ...createdFields, model_ref: Type.String({ description: 'Ref of the model version' }) })
export type ModelCreateRes = Static<typeof ModelCreateResSchema>

/** Upstream `DatasetReadRes`. */
export const DatasetSchema = Type.Object({
  ...versionFields,
  name: Type.String(),
  description: Type.Optional(Nullable(Type.String())),
  rows: Type.String({ description: 'Ref of the table holding the rows (weave:///entity/project/table/<digest>)' }),
})
export type Dataset = Static<typeof DatasetSchema>

/** Upstream `ModelReadRes`. */
export const ModelSchema = Type.Object({
  ...versionFields,
  name: Type.String(),
  description: Type.Optional(Nullable(Type.String())),
  source_code: Type.String({ description: 'Source code of the model' }),
  attributes: Type.Optional(Nullable(Type.Record(Type.String(), Type.Unknown()), { description: 'The extra attributes; null when none' })),
})
export type Model = Static<typeof ModelSchema>

export const OpListSchema = Type.Array(OpVersionSchema, { description: 'application/jsonl: one op version per line' })
export const DatasetListSchema = Type.Array(DatasetSchema, { description: 'application/jsonl: one dataset version per line' })
export const ModelListSchema = Type.Array(ModelSchema, { description: 'application/jsonl: one model version per line' })
