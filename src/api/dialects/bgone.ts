/**
 * bgone's own API as a dialect beside remove.bg's and Photoroom's: its fields are the option table's
 * (src/lib/option-table.ts) under their own names, each passed on as it is sent (the option's parser
 * reads it), its errors the contract's (src/service/errors.ts, written by the exchange), its answer
 * the image with X-Image-* headers, or JSON with the request's id.
 */
import type { ParsedForm } from '../../http/exchange.js';
import { MEDIA_TYPES, type RemoveBackgroundOptions } from '../../lib/index.js';
import { optionsFor } from '../../lib/option-table.js';
import { REMOVE_FORM } from '../form-fields.js';
import { type DialectField, dialectOptions, type RemovalDialect, translateFields, uncertaintyHeader, wantsJson } from './engine.js';

/** Every option a form carries, under its own name. */
export const BGONE_FIELDS: readonly DialectField[] = optionsFor('form').map((row) => ({ name: row.name, part: row.part, option: row.name }));

/** The library's options from a form of bgone's names, with the service's model. */
export function bgoneOptions(form: ParsedForm, model: string | undefined): RemoveBackgroundOptions {
  return dialectOptions(translateFields(BGONE_FIELDS, form), model);
}

/** bgone's own dialect: the option table's names, X-Image-* headers, the JSON answer with request_id. */
export const BGONE_DIALECT: RemovalDialect<undefined> = {
  form: REMOVE_FORM,
  read: (form, model) => ({ options: bgoneOptions(form, model), answer: undefined }),
  answer(ex, { result, model, charged, remaining, ms, rateHeaders }) {
    const { foreground } = result;
    const headers: Record<string, string> = {
      'X-Model': model,
      'X-Processing-Time-Ms': String(ms),
      'X-Image-Width': String(result.width),
      'X-Image-Height': String(result.height),
      'X-Foreground-Top': String(foreground.top),
      'X-Foreground-Left': String(foreground.left),
      'X-Foreground-Width': String(foreground.width),
      'X-Foreground-Height': String(foreground.height),
      'X-Uncertainty': uncertaintyHeader(result.uncertainty),
      'X-Credits-Charged': String(charged),
      'X-Credits-Remaining': String(remaining),
      'Cache-Control': 'no-store',
      ...rateHeaders,
    };
    if (wantsJson(ex.req.header('accept'))) {
      ex.json(
        200,
        {
          data: { result_b64: result.data.toString('base64'), width: result.width, height: result.height, foreground },
          request_id: ex.requestId,
        },
        headers,
      );
    } else {
      ex.send(200, { 'Content-Type': MEDIA_TYPES[result.format], ...headers }, result.data);
    }
  },
};
