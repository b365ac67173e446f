import { bodyProject, route, type Ctx, type Reply, type RouteDef } from './route.js'
import type { FeedbackBackend } from '../catalog/backends.js'
import { DomainError } from '../core/errors.js'
import {
  FeedbackCreateBatchReqSchema,
  FeedbackCreateBatchResSchema,
  FeedbackCreateReqSchema,
  FeedbackCreateResSchema,
  FeedbackPurgeReqSchema,
  FeedbackPurgeResSchema,
  FeedbackQueryReqSchema,
  FeedbackQueryResSchema,
  FeedbackReplaceReqSchema,
  type FeedbackCreateBatchReq,
  type FeedbackCreateReq,
  type FeedbackPurgeReq,
  type FeedbackQueryReq,
  type FeedbackReplaceReq,
} from '../schemas/feedback.js'

const userOf = (ctx: Ctx): string => ctx.principal?.userId ?? 'anonymous'

function createFeedback(feedback: FeedbackBackend) {
  return async (ctx: Ctx<FeedbackCreateReq>): Promise<Reply> => {
    const [res] = await feedback.create([ctx.body], userOf(ctx))
    return { body: res }
  }
}

function createBatch(feedback: FeedbackBackend) {
  return async (ctx: Ctx<FeedbackCreateBatchReq>): Promise<Reply> => {
    const batch = ctx.body.batch
    // The entity check reads the first row's project: one project per batch keeps it covering every row.
    if (batch.some((f) => f.project_id !== batch[0]!.project_id)) throw new DomainError(400, 'A feedback batch names one project')
    return { body: { res: await feedback.create(batch, userOf(ctx)) } }
  }
}

function queryFeedback(feedback: FeedbackBackend) {
  return async (ctx: Ctx<FeedbackQueryReq>): Promise<Reply> => ({ body: await feedback.query(ctx.body) })
}

function purgeFeedback(feedback: FeedbackBackend) {
  return async (ctx: Ctx<FeedbackPurgeReq>): Promise<Reply> => {
    await feedback.purge(ctx.body.project_id, ctx.body.query)
    return { body: {} }
  }
}

function replaceFeedback(feedback: FeedbackBackend) {
  return async (ctx: Ctx<FeedbackReplaceReq>): Promise<Reply> => {
    const { feedback_id, ...req } = ctx.body
    return { body: await feedback.replace(req.project_id, feedback_id, req, userOf(ctx)) }
  }
}

const common = { family: 'trace' as const, auth: 'key' as const, tags: ['Feedback'], method: 'POST' as const, project: bodyProject }

/** Feedback on calls and objects: reactions, notes, scorer results, annotations (docs/feedback.md). */
export function feedbackRoutes(feedback: FeedbackBackend): RouteDef[] {
  return [
    route({
      ...common,
      path: '/feedback/create',
      summary: 'Add feedback to a call or object, checked by type (reaction, note, runnable, annotation)',
      body: FeedbackCreateReqSchema,
      response: { description: 'The new row: id, created_at, wb_user_id and the stored payload', schema: FeedbackCreateResSchema },
      handler: createFeedback(feedback),
    }),
    route({
      ...common,
      path: '/feedback/batch/create',
      summary: 'Add several feedback rows of one project: all stored, or none',
      body: FeedbackCreateBatchReqSchema,
      response: { description: 'One answer per row, in order', schema: FeedbackCreateBatchResSchema },
      project: (ctx) => ctx.body.batch[0]?.project_id,
      handler: createBatch(feedback),
    }),
    route({
      ...common,
      path: '/feedback/query',
      summary: 'Read feedback: filtered by $expr, sorted, paged, with chosen fields or payload paths',
      body: FeedbackQueryReqSchema,
      response: { description: 'Matching rows and their total count', schema: FeedbackQueryResSchema },
      handler: queryFeedback(feedback),
    }),
    route({
      ...common,
      path: '/feedback/purge',
      summary: 'Delete feedback named by id ($eq or $in on id, or an $or of $eq)',
      body: FeedbackPurgeReqSchema,
      response: { description: 'Empty', schema: FeedbackPurgeResSchema },
      handler: purgeFeedback(feedback),
    }),
    route({
      ...common,
      path: '/feedback/replace',
      summary: 'Replace a feedback row by a new one (new id) in one step',
      body: FeedbackReplaceReqSchema,
      response: { description: 'The new row', schema: FeedbackCreateResSchema },
      handler: replaceFeedback(feedback),
    }),
  ]
}
