/**
 * Request headers as both backends expose them: looked up by lower-case name, '' when absent,
 * repeated headers joined in arrival order. Built from the raw name/value pairs of each backend
 * (uWS's req.forEach, node's rawHeaders) so that the joining rule is the same on both: node's own
 * req.headers would silently drop a second Authorization or Content-Type instead.
 */
export class RequestHeaders {
  private readonly values = new Map<string, string>();

  add(name: string, value: string): void {
    const key = name.toLowerCase();
    const previous = this.values.get(key);
    // Cookie pairs are separated by '; ' (RFC 6265 §5.4), every other list by ', ' (RFC 9110 §5.3).
    this.values.set(key, previous === undefined ? value : `${previous}${key === 'cookie' ? '; ' : ', '}${value}`);
  }

  get(name: string): string {
    return this.values.get(name.toLowerCase()) ?? '';
  }
}
