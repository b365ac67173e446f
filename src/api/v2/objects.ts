import type { TSchema } from '@sinclair/typebox'
import type { ObjectsBackend, TablesBackend } from '../../catalog/backends.js'
import { NumDeletedSchema } from '../../schemas/common.js'
import { pathProject, route, type Ctx, type Reply, type RouteDef } from '../route.js'
import { createDataset, createEvaluation, createModel, createScorer, createV2Op } from '../../catalog/v2-objects.js'
import { deleteVersions, listVersions, readVersion, type V2Kind } from '../../catalog/v2-versions.js'
import {
  CreatedVersionSchema,
  DatasetCreateReqSchema,
  DatasetListSchema,
  DatasetSchema,
  EvaluationCreateReqSchema,
  EvaluationCreateResSchema,
  EvaluationListSchema,
  EvaluationSchema,
  ListQuerySchema,
  ModelCreateReqSchema,
  ModelCreateResSchema,
  ModelListSchema,
  ModelSchema,
  OpCreateReqSchema,
  OpListSchema,
  OpVersionQuerySchema,
  OpVersionSchema,
  ScorerCreateReqSchema,
  ScorerCreateResSchema,
  ScorerListSchema,
  ScorerSchema,
  VersionsDeleteQuerySchema,
  type ListQuery,
  type VersionsDeleteQuery,
} from '../../schemas/v2.js'

export interface V2Stores {
  objects: ObjectsBackend
  tables: TablesBackend
}

/** The body has passed the kind's `createBody` schema, so it is that schema's type. */
type Create = (stores: V2Stores, projectId: string, body: never, userId: string) => Promise<unknown>

/** What differs between the five kinds' routes; the routes themselves are the same four for each. */
interface KindRoutes {
  kind: V2Kind
  tag: string
  /** Singular, for summaries. */
  one: string
  createBody: TSchema
  createRes: TSchema
  item: TSchema
  list: TSchema
  create: Create
  /** Extra query parameters of the version read (ops: `eager`). */
  readQuery?: TSchema
}

const KIND_ROUTES: KindRoutes[] = [
  {
    kind: 'ops',
    tag: 'Ops',
    one: 'op',
    createBody: OpCreateReqSchema,
    createRes: CreatedVersionSchema,
    item: OpVersionSchema,
    list: OpListSchema,
    create: (s, p, b, u) => createV2Op(s.objects, p, b, u),
    readQuery: OpVersionQuerySchema,
  },
  {
    kind: 'datasets',
    tag: 'Datasets',
    one: 'dataset',
    createBody: DatasetCreateReqSchema,
    createRes: CreatedVersionSchema,
    item: DatasetSchema,
    list: DatasetListSchema,
    create: (s, p, b, u) => createDataset(s.objects, s.tables, p, b, u),
  },
  {
    kind: 'scorers',
    tag: 'Scorers',
    one: 'scorer',
    createBody: ScorerCreateReqSchema,
    createRes: ScorerCreateResSchema,
    item: ScorerSchema,
    list: ScorerListSchema,
    create: (s, p, b, u) => createScorer(s.objects, p, b, u),
  },
  {
    kind: 'evaluations',
    tag: 'Evaluations',
    one: 'evaluation',
    createBody: EvaluationCreateReqSchema,
    createRes: EvaluationCreateResSchema,
    item: EvaluationSchema,
    list: EvaluationListSchema,
    create: (s, p, b, u) => createEvaluation(s.objects, p, b, u),
  },
  {
    kind: 'models',
    tag: 'Models',
    one: 'model',
    createBody: ModelCreateReqSchema,
    createRes: ModelCreateResSchema,
    item: ModelSchema,
    list: ModelListSchema,
    create: (s, p, b, u) => createModel(s.objects, p, b, u),
  },
]

const userOf = (ctx: Ctx) => ctx.principal?.userId ?? 'anonymous'

function createHandler(stores: V2Stores, k: KindRoutes) {
  return async (ctx: Ctx): Promise<Reply> => ({ body: await k.create(stores, pathProject(ctx), ctx.body as never, userOf(ctx)) })
}

/** JSON lines, one read result per line (Weave's v2 listings). */
function listHandler(stores: V2Stores, k: KindRoutes) {
  return async (ctx: Ctx<unknown, ListQuery>): Promise<Reply> => {
    const items = await listVersions(stores.objects, k.kind, pathProject(ctx), ctx.query)
    return { raw: items.map((i) => JSON.stringify(i) + '\n').join(''), contentType: 'application/jsonl' }
  }
}

/**
 * The op read always carries the code: Weave's own read loads it whatever `eager` says, and clients that
 * leave the flag out expect it. The flag is accepted (and validated) for compatibility.
 */
function readHandler(stores: V2Stores, k: KindRoutes) {
  return async (ctx: Ctx): Promise<Reply> => ({
    body: await readVersion(stores.objects, k.kind, pathProject(ctx), ctx.params.object_id!, ctx.params.digest!),
  })
}

function deleteHandler(stores: V2Stores, k: KindRoutes) {
  return async (ctx: Ctx<unknown, VersionsDeleteQuery>): Promise<Reply> => ({
    body: { num_deleted: await deleteVersions(stores.objects, k.kind, pathProject(ctx), ctx.params.object_id!, ctx.query.digests) },
  })
}

const V2 = '/v2/{entity}/{project}'
const common = { family: 'trace' as const, auth: 'key' as const, project: pathProject }

function routesOf(stores: V2Stores, k: KindRoutes): RouteDef[] {
  const base = `${V2}/${k.kind}`
  const tags = [k.tag]
  return [
    route({
      ...common,
      tags,
      method: 'POST',
      path: base,
      summary: `Create a ${k.one} version (same content, same digest)`,
      body: k.createBody,
      response: { description: `The ${k.one} version`, schema: k.createRes },
      handler: createHandler(stores, k),
    }),
    route({
      ...common,
      tags,
      method: 'GET',
      path: base,
      summary: `List ${k.kind} (every live version; JSON lines)`,
      query: ListQuerySchema,
      response: { description: `application/jsonl: one ${k.one} version per line`, schema: k.list, contentType: 'application/jsonl' },
      handler: listHandler(stores, k),
    }),
    route({
      ...common,
      tags,
      method: 'GET',
      path: `${base}/{object_id}/versions/{digest}`,
      summary: `Read one ${k.one} version (digest, \`latest\` or \`v<N>\`)`,
      query: k.readQuery,
      response: { description: `The ${k.one} version`, schema: k.item },
      handler: readHandler(stores, k),
    }),
    route({
      ...common,
      tags,
      method: 'DELETE',
      path: `${base}/{object_id}`,
      summary: `Delete versions of a ${k.one} (repeat \`digests\`; none given: all versions)`,
      query: VersionsDeleteQuerySchema,
      response: { description: 'How many versions were deleted', schema: NumDeletedSchema },
      handler: deleteHandler(stores, k),
    }),
  ]
}

/** The versioned kinds of the /v2 project API: ops, datasets, scorers, evaluations, models (docs/objects.md). */
export function v2ObjectRoutes(stores: V2Stores): RouteDef[] {
  return KIND_ROUTES.flatMap((k) => routesOf(stores, k))
}
