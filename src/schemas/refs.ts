import { Type, type Static } from '@sinclair/typebox'

/**
 * POST /refs/read_batch. The count limit (1000) is checked by the resolver, so more answers 400 as in
 * Weave rather than 422; so are the refs' shape and length (docs/refs.md).
 */
export const RefsReadBatchReqSchema = Type.Object({
  refs: Type.Array(Type.String({ description: 'A ref URI: weave:///entity/project/object/name:digest[/edge/value]*' }), {
    description: 'Refs to read, at most 1000',
  }),
})
export type RefsReadBatchReq = Static<typeof RefsReadBatchReqSchema>

export const RefsReadBatchResSchema = Type.Object({
  vals: Type.Array(Type.Unknown(), { description: 'The value of each ref, in order; null for a deleted object or another project' }),
})
export type RefsReadBatchRes = Static<typeof RefsReadBatchResSchema>
