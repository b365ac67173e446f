/** The identity a request acts as. `userId` becomes `svc_user_id` on everything it writes. */
export interface Principal {
  keyId: string
  name: string
  userId: string
  /** null: every entity. */
  entities: string[] | null
  isAdmin: boolean
}

/** May this principal read and write projects of `entity`? */
export function canAccess(p: Pick<Principal, 'entities'>, entity: string): boolean {
  return p.entities === null || p.entities.includes(entity)
}
