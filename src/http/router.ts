/**
 * Routes by method and exact path, by path pattern (`/api/v1/batches/:id`: a `:name` segment
 * matches one non-empty segment), or by path prefix (static assets), the same on every backend.
 * A known path with another method gets 405 with Allow; anything else 404. A handler that throws or
 * rejects gets the contract's 500 (an HttpError it throws is answered as itself), and is logged; the
 * process never goes down for a handler's error.
 */
import type { Logger } from '../config/logger.js';
import { HttpError, httpError } from './errors.js';
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

interface Pattern {
  path: string;
  /** Literal segments as strings; `:name` segments as { name }. */
  segments: Array<string | { name: string }>;
}

interface Prefix {
  prefix: string;
  fallback: FallbackAnswers;
}

const JSON_FALLBACK: FallbackAnswers = {
  notFound: (ex) => ex.error(httpError('not_found')),
  methodNotAllowed: (ex, allowed) => ex.error(httpError('method_not_allowed'), { Allow: allowed.join(', ') }),
};

export class Router {
  /** path → method → route */
  private readonly routes = new Map<string, Map<string, Route>>();
  /** Registered paths with `:name` segments (their routes are in `routes` under the pattern). */
  private readonly patterns: Pattern[] = [];
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
    if (!this.routes.has(path) && path.includes('/:')) {
      const segments = path
        .split('/')
        .slice(1)
        .map((s) => (s.startsWith(':') ? { name: s.slice(1) } : s));
      this.patterns.push({ path, segments });
    }
    this.routes.set(path, byMethod);
  }

  get(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('GET', path, handler, fallback);
  }

  post(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('POST', path, handler, fallback);
  }

  delete(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('DELETE', path, handler, fallback);
  }

  /** The pattern matching `path` and its parameters; undefined when none does. */
  private match(path: string): { path: string; params: Record<string, string> } | undefined {
    const parts = path.split('/').slice(1);
    for (const pattern of this.patterns) {
      if (pattern.segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      const ok = pattern.segments.every((segment, i) => {
        const part = parts[i]!;
        if (typeof segment === 'string') return segment === part;
        if (part === '') return false;
        try {
          params[segment.name] = decodeURIComponent(part);
        } catch {
          return false;
        }
        return true;
      });
      if (ok) return { path: pattern.path, params };
    }
    return undefined;
  }

  /** Unknown paths under `prefix` (e.g. '/dashboard/') are answered by `fallback`. */
  group(prefix: string, fallback: FallbackAnswers): void {
    this.prefixes.push({ prefix, fallback });
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** The backend's entry point. */
  readonly handle = (req: HttpRequest, res: HttpResponse): void => {
    let routePath = req.path;
    let params: Record<string, string> = {};
    let byMethod = this.routes.get(req.path);
    if (!byMethod) {
      const matched = this.match(req.path);
      if (matched) {
        routePath = matched.path;
        params = matched.params;
        byMethod = this.routes.get(matched.path);
      }
    }
    if (!byMethod) {
      const group = this.prefixes.find((p) => req.path.startsWith(p.prefix));
      const ex = new Exchange(req, res, group ? `${group.prefix}*` : 'other', this.record);
      (group?.fallback ?? JSON_FALLBACK).notFound(ex);
      return;
    }
    const route = byMethod.get(req.method);
    if (!route) {
      const ex = new Exchange(req, res, routePath, this.record, params);
      const any = byMethod.values().next().value as Route;
      (any.fallback ?? JSON_FALLBACK).methodNotAllowed(ex, [...byMethod.keys()]);
      return;
    }
    const ex = new Exchange(req, res, routePath, this.record, params);
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
    else ex.error(httpError('internal_server_error'));
  }
}
