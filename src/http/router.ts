/**
 * Routes by method and exact path (plus path prefixes for static assets), the same on every backend.
 * A known path with another method gets 405 with Allow; anything else 404. A handler that throws or
 * rejects gets the contract's 500 (an HttpError it throws is answered as itself), and is logged; the
 * process never goes down for a handler's error.
 */
import type { Logger } from '../config/logger.js';
import { HttpError } from './errors.js';
import { type AnswerRecorder, Exchange } from './exchange.js';
import type { HttpRequest, HttpResponse } from './types.js';

export type RouteHandler = (ex: Exchange) => void | Promise<void>;

/** How a group of routes answers its own unknown paths and wrong methods (the dashboard: HTML pages). */
export interface FallbackAnswers {
  notFound(ex: Exchange): void;
  methodNotAllowed(ex: Exchange, allowed: readonly string[]): void;
  /** A handler failed with something else than an HttpError. */
  failed?(ex: Exchange, err: unknown): void;
}

interface Route {
  handler: RouteHandler;
  fallback: FallbackAnswers | undefined;
}

interface Prefix {
  prefix: string;
  fallback: FallbackAnswers;
}

const JSON_FALLBACK: FallbackAnswers = {
  notFound: (ex) => ex.error(new HttpError('not_found')),
  methodNotAllowed: (ex, allowed) => ex.error(new HttpError('method_not_allowed'), { Allow: allowed.join(', ') }),
};

export class Router {
  /** path → method → route */
  private readonly routes = new Map<string, Map<string, Route>>();
  /** Paths under a prefix answered by that group's fallback (longest prefix first). */
  private readonly prefixes: Prefix[] = [];

  constructor(
    private readonly record: AnswerRecorder,
    private readonly logger?: Logger,
  ) {}

  add(method: string, path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    const byMethod = this.routes.get(path) ?? new Map<string, Route>();
    const upper = method.toUpperCase();
    if (byMethod.has(upper)) throw new Error(`route ${upper} ${path} is registered twice`);
    byMethod.set(upper, { handler, fallback });
    this.routes.set(path, byMethod);
  }

  get(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('GET', path, handler, fallback);
  }

  post(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('POST', path, handler, fallback);
  }

  /** Unknown paths under `prefix` (e.g. '/dashboard/') are answered by `fallback`. */
  group(prefix: string, fallback: FallbackAnswers): void {
    this.prefixes.push({ prefix, fallback });
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** The backend's entry point. */
  readonly handle = (req: HttpRequest, res: HttpResponse): void => {
    const byMethod = this.routes.get(req.path);
    if (!byMethod) {
      const group = this.prefixes.find((p) => req.path.startsWith(p.prefix));
      const ex = new Exchange(req, res, group ? `${group.prefix}*` : 'other', this.record);
      (group?.fallback ?? JSON_FALLBACK).notFound(ex);
      return;
    }
    const route = byMethod.get(req.method);
    if (!route) {
      const ex = new Exchange(req, res, req.path, this.record);
      const any = byMethod.values().next().value as Route;
      (any.fallback ?? JSON_FALLBACK).methodNotAllowed(ex, [...byMethod.keys()]);
      return;
    }
    const ex = new Exchange(req, res, req.path, this.record);
    let result: void | Promise<void>;
    try {
      result = route.handler(ex);
    } catch (err) {
      this.failed(ex, err, route.fallback);
      return;
    }
    if (result instanceof Promise) result.catch((err: unknown) => this.failed(ex, err, route.fallback));
  };

  private failed(ex: Exchange, err: unknown, fallback: FallbackAnswers | undefined): void {
    if (err instanceof HttpError) {
      ex.error(err);
      return;
    }
    if (!ex.open) return;
    this.logger?.error({ requestId: ex.requestId, route: ex.route, err }, 'request failed');
    if (fallback?.failed) fallback.failed(ex, err);
    else ex.error(new HttpError('internal_server_error'));
  }
}
