/**
 * What an admin did (`webhook_delivery.replay`: a user's delivery sent again from the admin API), or the service itself
 * (`webhook_endpoint.disable`: an endpoint that kept failing, actor `genservice`).
 */
export type AuditAction =
  | 'user.create'
  | 'credits.add'
  | 'key.create'
  | 'key.revoke'
  | 'webhook_endpoint.disable'
  | 'webhook_delivery.replay'
  | 'organization.create'
  | 'organization.limits.set'
  | 'organization.member.add'
  | 'organization.member.remove'
  | 'user.limits.set';

export interface AuditEntry {
  /** Opaque, increasing with the order entries were appended in this log. */
  id: string;
  /** Epoch ms. */
  at: number;
  /** Who: the admin key's name, or what the host's code said it was. */
  actor: string;
  action: AuditAction;
  userId?: string;
  keyId?: string;
  /** What was asked, without secrets (amounts, reasons, a key's name, scopes and limits). */
  details?: Record<string, unknown>;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/**
 * Every admin action on users, credits, keys, organisations and users' webhook deliveries, newest first.
 *
 * Guarantees (the contract suite checks each): `append` stores the entry whole or not at all and never changes or
 * drops an earlier one; `list` pages from the newest backwards, each entry once, however many are appended meanwhile.
 */
export interface AuditLog {
  append(entry: Omit<AuditEntry, 'id'>): Promise<void>;
  /** Newest first; `before` is a `nextCursor`. */
  list(options: { before?: string; limit: number }): Promise<AuditPage>;
}
