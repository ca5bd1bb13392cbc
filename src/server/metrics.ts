/** Prometheus metrics in the text exposition format, without a client library. */
const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64];
const INFERENCE_BUCKETS = [0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 16];

class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;
  constructor(readonly buckets: number[]) {
    this.counts = buckets.map(() => 0);
  }
  observe(value: number): void {
    this.sum += value;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) this.counts[i]!++;
  }
  render(name: string, labels = ''): string[] {
    const sep = labels ? ',' : '';
    const lines = this.buckets.map((b, i) => `${name}_bucket{${labels}${sep}le="${b}"} ${this.counts[i]}`);
    lines.push(`${name}_bucket{${labels}${sep}le="+Inf"} ${this.count}`);
    lines.push(`${name}_sum${labels ? `{${labels}}` : ''} ${this.sum}`);
    lines.push(`${name}_count${labels ? `{${labels}}` : ''} ${this.count}`);
    return lines;
  }
}

export class Metrics {
  private readonly requests = new Map<string, number>();
  private readonly latency = new Histogram(LATENCY_BUCKETS);
  private readonly inference = new Histogram(INFERENCE_BUCKETS);

  constructor(private readonly queueLength: () => number) {}

  /** One finished request: its route, status code, error code (or 'ok') and seconds taken. */
  record(route: string, status: number, code: string, seconds: number): void {
    const key = `route="${route}",status="${status}",code="${code}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    if (route === '/api/v1/remove') this.latency.observe(seconds);
  }

  recordInference(seconds: number): void {
    this.inference.observe(seconds);
  }

  render(): string {
    const lines = ['# HELP bgone_requests_total HTTP requests by route, status and code.', '# TYPE bgone_requests_total counter'];
    for (const [labels, n] of this.requests) lines.push(`bgone_requests_total{${labels}} ${n}`);
    lines.push('# HELP bgone_request_duration_seconds Latency of POST /api/v1/remove.', '# TYPE bgone_request_duration_seconds histogram');
    lines.push(...this.latency.render('bgone_request_duration_seconds'));
    lines.push('# HELP bgone_inference_seconds Model inference time per image.', '# TYPE bgone_inference_seconds histogram');
    lines.push(...this.inference.render('bgone_inference_seconds'));
    lines.push('# HELP bgone_queue_length Jobs running or waiting in the native core.', '# TYPE bgone_queue_length gauge');
    lines.push(`bgone_queue_length ${this.queueLength()}`);
    return `${lines.join('\n')}\n`;
  }
}
