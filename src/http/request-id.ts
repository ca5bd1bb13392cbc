import { randomBytes } from 'node:crypto';

/** A support trace identifier: req_ + 20 hex characters (80 random bits). */
export function newRequestId(): string {
  return `req_${randomBytes(10).toString('hex')}`;
}
