/**
 * One metered background removal after admission (service/admission.ts), shared by POST
 * /api/v1/remove, the dashboard's try-it endpoint and the dialects of other APIs (dialects/,
 * which give their own form, option names and success answer): the form read (multipart through busboy, or
 * JSON, or urlencoded; limits from the option table), option validation, the downloads of
 * image_url and bg_image_url (each holding an upload place meanwhile), one credit
 * (service/metering.ts) reserved, removeBackground, the charge committed only when the answer is a
 * success, and the answer itself (the image, or JSON with it in base64 for `Accept: application/json`). A client that goes away is never charged; a
 * job already running keeps its admission place until it ends, one still queued for the native core
 * is dropped. The body must arrive within the exchange's body deadline (408 otherwise).
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../config/logger.js';
import { HttpError } from '../http/errors.js';
import type { ErrorRenderer, Exchange, FormShape, ParsedForm } from '../http/exchange.js';
import { BgoneError } from '../lib/errors.js';
import { type PreparedJob, type RemoveBackgroundResult, removeBackground } from '../lib/index.js';
import { prepareRequest } from '../lib/prepare-request.js';
import type { Admission, Principal, Ticket } from '../service/admission.js';
import { ApiError } from '../service/errors.js';
import { type JobMemoryGate, JobMemoryGateTimeout } from '../service/job-memory-gate.js';
import { Credit } from '../service/metering.js';
import type { Metrics } from '../service/metrics.js';
import { type ModelsAllowed, requestModel } from '../service/model-access.js';
import type { Store } from '../store/index.js';
import { BGONE_DIALECT } from './dialects/bgone.js';
import type { AnyRemovalDialect } from './dialects/engine.js';
import { REMOVE_FORM_MAX_BYTES } from './form-fields.js';

export type Headers = Record<string, string>;

/** The largest body of a removal (form-fields.ts). */
export const MAX_BODY_BYTES = REMOVE_FORM_MAX_BYTES;

export const tooLarge = () =>
  new ApiError(
    'image_too_large',
    `The request body is larger than ${Math.floor(MAX_BODY_BYTES / 2 ** 20)} MB (an image of at most 20 MB, as a file or in base64, and a background image).`,
    {
      field: 'image_file',
      limit_bytes: MAX_BODY_BYTES,
    },
  );

/** Maps the library's error codes onto the HTTP contract. */
export function fromLibraryError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof BgoneError) {
    if (err.code === 'internal_error') return new ApiError('internal_server_error');
    return new ApiError(err.code, err.message, err.details);
  }
  return new ApiError('internal_server_error');
}

/**
 * What an Idempotency-Key is bound to: the image bytes, the background image's and the options as
 * the native core will apply them (hex SHA-256), so that a replay returns the same result, and
 * another image or other options under a used key are refused. Every option ends in the native
 * options, so every option counts; those that cannot change the output are left out (the padding
 * without a crop, the aspect of any crop but W:H), and so are the inference size and the filter
 * radius, which follow from the image, which the hash covers already.
 */
export function requestFingerprint(job: PreparedJob): string {
  const { inferenceSize: _side, guidedRadius: _radius, ...applied } = job.options;
  const canonical = {
    ...applied,
    model: job.model ?? null,
    ...(applied.crop === 'none' ? { paddingShare: null, paddingPx: null } : {}),
    ...(applied.crop === 'aspect' ? {} : { aspectWidth: null, aspectHeight: null }),
  };
  const hash = createHash('sha256').update(JSON.stringify(canonical)).update('\n').update(job.input);
  if (job.background) hash.update('\n').update(job.background);
  return hash.digest('hex');
}

/** Idempotency-Key: 1 to 255 visible ASCII characters (or none). */
export function validIdempotencyKey(value: string): boolean {
  return value.length <= 255 && !/[^\x21-\x7e]/.test(value);
}

export const idempotencyKeyError = () =>
  new ApiError('validation_error', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', { field: 'Idempotency-Key' });

/** What a successful removal answers with, besides the image. */
export interface RemovalOutcome {
  result: RemoveBackgroundResult;
  /** The model that ran (X-Model). */
  model: string;
  /** Credits charged: 1, or 0 for an idempotent replay. */
  charged: number;
  /** The balance after the charge. */
  remaining: number;
  ms: number;
  rateHeaders: Headers;
}

export interface RemovalDeps {
  store: Store;
  /** The service's default model (BGONE_MODEL; undefined: the manifest's). */
  model?: string | undefined;
  /** The models a request may name besides the default (BGONE_MODELS_ALLOWED). */
  modelsAllowed?: ModelsAllowed | undefined;
  logger?: Logger | undefined;
  metrics?: Metrics | undefined;
  /** Admission by estimated memory (absent: none). */
  memory?: JobMemoryGate | undefined;
  /** Seconds in Retry-After when the memory budget has no room in time. */
  overloadRetryAfter?: number | undefined;
}

/** A removal route: who calls (the key, where its API carries it), how it refuses and answers (its dialect). */
export interface RemovalRoute {
  admission: Admission;
  removal: RemovalDeps;
  /** The principal of the request's key; null for none or a bad one. */
  authenticate: (ex: Exchange) => Promise<Principal | null>;
  unauthenticated: ApiError;
  dialect?: AnyRemovalDialect | undefined;
  /** The dialect's error body and status (none: the contract's). */
  renderErrors?: ErrorRenderer | undefined;
}

/**
 * The handler of a removal route, the same for every dialect: the one admission path (metered),
 * the Idempotency-Key's form, then the metered removal.
 */
export function removalHandler(route: RemovalRoute): (ex: Exchange) => Promise<void> {
  return async (ex) => {
    if (route.renderErrors) ex.renderErrors(route.renderErrors);
    const ticket = await route.admission.admit(ex, () => route.authenticate(ex), route.unauthenticated, { metered: true });
    if (!ticket) return;
    if (!validIdempotencyKey(ex.req.header('idempotency-key'))) {
      ex.error(idempotencyKeyError(), ticket.rateHeaders);
      ticket.release();
      return;
    }
    new MeteredRemoval(ex, ticket, route.removal, route.dialect).start();
  };
}

export class MeteredRemoval {
  private readonly credit: Credit;
  private open = true;
  private processing = false;
  /** Aborted when the client goes away: drops the job if it still waits in the library's queue. */
  private readonly job = new AbortController();
  /** The model the job runs (requestModel), once the options are read. */
  private model = '';

  constructor(
    private readonly ex: Exchange,
    private readonly ticket: Ticket,
    private readonly deps: RemovalDeps,
    private readonly dialect: AnyRemovalDialect = BGONE_DIALECT,
  ) {
    this.credit = new Credit({ store: deps.store, logger: deps.logger, requestId: ex.requestId, retryAfterSeconds: deps.overloadRetryAfter ?? 5 });
  }

  /** Streams the upload and runs the job; the answer goes through the exchange. */
  start(): void {
    this.ex.onAbort(() => this.abort());
    if (!this.open) return;
    // Under the body deadline: an upload still arriving then is answered 408 and its connection
    // closed, which frees the admission place; nothing was reserved yet.
    const body = (form: FormShape, textBodies: boolean) => this.ex.readForm({ form, maxBodyBytes: MAX_BODY_BYTES, tooLarge, textBodies });
    void this.run(this.dialect.formOf ? this.dialect.formOf(this.ex, body) : body(this.dialect.form, true));
  }

  /**
   * The client went away: nothing is charged. A job still waiting for the native core is dropped
   * (its place goes back when removeBackground rejects); one already inside keeps its place until
   * it ends. The rate-limit count stays either way: the request was made.
   */
  private abort(): void {
    if (!this.open) return;
    this.open = false;
    this.job.abort();
    this.credit.release();
    this.deps.logger?.info({ requestId: this.ex.requestId, event: 'aborted' }, 'client aborted');
    if (!this.processing) this.ticket.release();
  }

  /** Answers an error; the credit, if any, is released. */
  private fail(err: HttpError): void {
    if (!this.open) return;
    this.open = false;
    this.credit.release();
    this.ex.error(err, this.ticket.rateHeaders);
    this.deps.logger?.info({ requestId: this.ex.requestId, code: err.code, ms: Math.round(this.ex.seconds() * 1000) }, 'request failed');
    if (!this.processing) this.ticket.release();
  }

  private async run(reading: Promise<ParsedForm>): Promise<void> {
    let form: ParsedForm;
    try {
      form = await reading;
    } catch (err) {
      return this.fail(fromLibraryError(err));
    }
    if (!this.open) return;
    // The preparation (prepare-request.ts): the options (every value outside the option table is an
    // error, never ignored), the model allowed, one source of the image, the downloads (each holding
    // an upload place), the image's bytes and header (no pixel decoded), the crop caps and the
    // background's data, before the reservation: a request refused here never holds a credit.
    let job: PreparedJob;
    let request: unknown;
    try {
      const read = this.dialect.read(form, this.deps.model);
      request = read.answer;
      job = await prepareRequest(undefined, read.options, {
        checkModel: (name) => {
          this.model = requestModel(name, this.deps.model, this.deps.modelsAllowed);
        },
        downloading: () => this.ticket.downloading(),
        signal: this.job.signal,
        owned: true,
      });
      if (!this.open) return; // the client left meanwhile: abort() answered for it
    } catch (err) {
      if (this.job.signal.aborted) return; // the client left during a download: abort() answered for it
      return this.fail(fromLibraryError(err));
    }
    // Memory: the job's estimated peak against the budget, before a credit is held for it.
    let releaseMemory = () => {};
    if (this.deps.memory) {
      try {
        releaseMemory = await this.deps.memory.acquire(job.memoryBytes, this.job.signal);
      } catch (err) {
        if (this.job.signal.aborted) return; // the client left while waiting: abort() answered for it
        if (!(err instanceof JobMemoryGateTimeout)) return this.fail(new ApiError('internal_server_error'));
        return this.fail(
          new ApiError('overloaded', 'The server has no memory free for this image now; retry after the time in Retry-After.', undefined, {
            'Retry-After': String(this.deps.overloadRetryAfter ?? 5),
          }),
        );
      }
      if (!this.open) return releaseMemory();
    }
    try {
      await this.reserveAndProcess(job, request);
    } finally {
      releaseMemory();
    }
  }

  /** The credit, the work, the charge and the answer, for an upload that passed every check. */
  private async reserveAndProcess(job: PreparedJob, request: unknown): Promise<void> {
    const { requestId } = this.ex;
    const { accountId, keyId } = this.ticket.principal;
    const { logger } = this.deps;
    // One credit reserved; charged only when the answer is a success.
    const idempotencyKey = this.ex.req.header('idempotency-key') || undefined;
    const reserved = await this.credit.reserve(accountId, keyId, idempotencyKey ? { key: idempotencyKey, imageHash: requestFingerprint(job) } : undefined);
    if (reserved instanceof ApiError) return this.fail(reserved);
    if (!this.open) return this.credit.release(); // the client left while the reservation was being made
    let remaining = reserved;
    // The image work.
    let result: RemoveBackgroundResult;
    this.processing = true;
    try {
      result = await removeBackground(job, { signal: this.job.signal });
    } catch (err) {
      this.processing = false;
      if (this.job.signal.aborted && err === this.job.signal.reason) return this.ticket.release(); // dropped from the queue: the client left
      if (!(err instanceof BgoneError) || err.code === 'internal_error')
        logger?.error({ requestId, code: (err as BgoneError).code, detail: (err as BgoneError).detail }, 'processing failed');
      if (!this.open) return this.ticket.release();
      return this.fail(fromLibraryError(err));
    }
    this.processing = false;
    this.deps.metrics?.recordInference(result.timings.inference / 1000);
    if (!this.open) return this.ticket.release(); // abort() released the credit
    // Charge, then answer.
    let charged = 0;
    if (this.credit.held) {
      const committed = await this.credit.commit();
      if (committed instanceof ApiError) return this.fail(committed);
      remaining = committed; // the balance from the charge's own transaction
      charged = 1;
    }
    if (!this.open) {
      // The client left while the charge was written: it got nothing, so it pays nothing.
      if (charged) logger?.warn({ requestId }, 'client left during the charge; the charge stands (the response may have been lost)');
      return this.ticket.release();
    }
    const ms = Math.round(this.ex.seconds() * 1000);
    this.open = false;
    this.dialect.answer(this.ex, { result, model: this.model, charged, remaining, ms, rateHeaders: this.ticket.rateHeaders }, request);
    logger?.info(
      { requestId, status: 200, ms, width: result.width, height: result.height, bytes: result.data.length, charged, timings: result.timings },
      'image processed',
    );
    this.ticket.release();
  }
}
