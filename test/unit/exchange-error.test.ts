/**
 * The exchange's error answer (Exchange.error in src/http/exchange.ts): the contract's body with a
 * Bearer challenge on 401, and a route's own renderer (renderErrors), which picks the status and
 * the body while the error's headers and the call's still go out.
 */
import { describe, expect, it } from 'vitest';
import { HttpError } from '../../src/http/errors.js';
import { Exchange } from '../../src/http/exchange.js';
import { memoryRequest, RecordedResponse } from '../helpers/recorded-exchange.js';

function exchange(res: RecordedResponse): Exchange {
  return new Exchange(memoryRequest('POST', '/v1/x', {}), res, '/v1/x', () => {});
}

const unauthenticated = new HttpError(401, 'authentication_error', 'No key.', undefined, { 'X-From-Error': 'yes' });

describe('Exchange.error', () => {
  it("writes the contract's body, with the Bearer challenge on a 401", () => {
    const res = new RecordedResponse();
    const ex = exchange(res);
    ex.error(unauthenticated, { 'X-From-Call': 'yes' });
    const [answer] = res.answers;
    expect(answer!.status).toBe(401);
    expect(res.json).toEqual({ code: 'authentication_error', message: 'No key.', request_id: ex.requestId });
    expect(answer!.headers).toMatchObject({ 'WWW-Authenticate': expect.stringMatching(/^Bearer/), 'X-From-Error': 'yes', 'X-From-Call': 'yes' });
  });

  it("writes a route's renderer's status and body, keeping the headers", () => {
    const res = new RecordedResponse();
    const ex = exchange(res);
    ex.renderErrors((err, requestId) => ({ status: 403, body: { errors: [{ code: err.code, id: requestId }] } }));
    ex.error(unauthenticated, { 'X-From-Call': 'yes' });
    const [answer] = res.answers;
    expect(answer!.status).toBe(403);
    expect(res.json).toEqual({ errors: [{ code: 'authentication_error', id: ex.requestId }] });
    expect(answer!.headers).toMatchObject({ 'Content-Type': 'application/json', 'X-From-Error': 'yes', 'X-From-Call': 'yes' });
    expect(answer!.headers['WWW-Authenticate']).toBeUndefined();
  });
});
