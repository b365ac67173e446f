import { Type, type Static } from '@sinclair/typebox'
import { ProjectIdSchema } from './common.js'

/** POST /files/query_stats */
export const FilesStatsReqSchema = Type.Object({ project_id: ProjectIdSchema }, { additionalProperties: false })
export type FilesStatsReq = Static<typeof FilesStatsReqSchema>

export const FilesStatsResSchema = Type.Object({
  total_size_bytes: Type.Integer({ description: 'Bytes of every file stored in the project, each content once' }),
})
export type FilesStatsRes = Static<typeof FilesStatsResSchema>
