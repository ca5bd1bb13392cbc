/**
 * Standard Webhooks signatures: `v1,` + base64 of HMAC-SHA256 over "{id}.{timestamp}.{body}", keyed
 * with the bytes of the secret after its `whsec_` prefix (base64). Receivers verify them with any
 * implementation of the specification (the tests use the `standardwebhooks` package).
 */
import { createHmac } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';

export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  if (!secret.startsWith(SECRET_PREFIX)) throw new TypeError('a webhook secret starts with whsec_');
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  const mac = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}
