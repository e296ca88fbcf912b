// The part of autocannon's API the benchmarks use (the package ships no types).
declare module "autocannon" {
  interface AutocannonResult {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number; average: number };
    errors: number;
    non2xx: number;
  }
  function autocannon(options: {
    url: string;
    connections?: number;
    duration?: number;
    method?: string;
    body?: string;
    headers?: Record<string, string>;
  }): Promise<AutocannonResult>;
  export default autocannon;
}
