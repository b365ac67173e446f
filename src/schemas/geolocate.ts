import { Type, type Static } from '@sinclair/typebox'

/** GET /geolocate */
export const GeolocateQuerySchema = Type.Object({
  ip: Type.Optional(Type.String({ maxLength: 100, description: 'IP address to locate (IPv4 or IPv6); defaults to the client address' })),
})
export type GeolocateQuery = Static<typeof GeolocateQuerySchema>

export const GeolocationResSchema = Type.Object({
  ip: Type.String(),
  location: Type.Object({
    file_index: Type.Integer({ description: '0: the IPv4 range file, 1: the IPv6 range file' }),
    range_start_int: Type.Integer({ description: 'First address of the range as an integer (exact; IPv6 values exceed 2^53)' }),
    range_end_int: Type.Integer({ description: 'Last address of the range as an integer (inclusive)' }),
    range_start_ip: Type.String(),
    range_end_ip: Type.String(),
    country_code: Type.String(),
    country_name: Type.String(),
  }),
  allowed: Type.Boolean({ description: 'false for countries on the deny list' }),
})
export type GeolocationRes = Static<typeof GeolocationResSchema>
