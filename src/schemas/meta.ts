import { Type, type Static } from '@sinclair/typebox'

/** GET /health */
export const HealthSchema = Type.Object({ status: Type.Literal('ok') })
export type Health = Static<typeof HealthSchema>

/** GET /version */
/** Where calls are kept (`--storage`), and ClickHouse's version when it is ClickHouse. */
export const StorageInfoSchema = Type.Object({
  backend: Type.Union([Type.Literal('embedded'), Type.Literal('clickhouse'), Type.Literal('chdb')]),
  clickhouse_version: Type.Optional(Type.String({ description: "ClickHouse's `SELECT version()`" })),
})
export type StorageInfo = Static<typeof StorageInfoSchema>

export const VersionSchema = Type.Object({
  version: Type.String(),
  storage: Type.Optional(StorageInfoSchema),
  node: Type.String(),
  duckdb: Type.String(),
  inference: Type.Array(
    Type.Object({
      model: Type.String(),
      backend: Type.String({ description: 'TF.js backend: tensorflow, wasm-simd, wasm or cpu' }),
      architecture: Type.String(),
    }),
  ),
})
export type Version = Static<typeof VersionSchema>

/** GET /server_info */
export const ServerInfoSchema = Type.Object({
  min_required_weave_python_version: Type.String(),
  trace_server_version: Type.String(),
})
export type ServerInfo = Static<typeof ServerInfoSchema>
