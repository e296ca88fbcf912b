import { selectBackend, tf } from "/work/main/packages/trainer-gpu/src/index.ts";
await selectBackend({ log: () => {} });
function bench(name: string, a: tf.Tensor, b: tf.Tensor, flops: number, f = (x: tf.Tensor, y: tf.Tensor) => tf.matMul(x as tf.Tensor3D, y as tf.Tensor3D)) {
  for (let i = 0; i < 3; i++) f(a, b).dispose();
  const N = 20; const t0 = performance.now();
  for (let i = 0; i < N; i++) { const c = f(a, b); c.dataSync(); c.dispose(); }
  const ms = (performance.now() - t0) / N;
  console.log(name, ms.toFixed(3), "ms", (flops / ms / 1e6).toFixed(2), "GFLOP/s");
}
const r = (s: number[]) => tf.randomNormal(s);
bench("2D 2048x64 @ 64x64", r([2048, 64]), r([64, 64]), 2 * 2048 * 64 * 64);
bench("2D 2048x64 @ 64x256", r([2048, 64]), r([64, 256]), 2 * 2048 * 64 * 256);
bench("2D 2048x256 @ 256x64", r([2048, 256]), r([256, 64]), 2 * 2048 * 64 * 256);
bench("2D 64x2048 @ 2048x64 (weight grad)", r([64, 2048]), r([2048, 64]), 2 * 2048 * 64 * 64);
bench("2D 2048x256 @ 256x256", r([2048, 256]), r([256, 256]), 2 * 2048 * 256 * 256);
bench("2D 256x1024 @ 1024x256 (wgrad d256)", r([256, 1024]), r([1024, 256]), 2 * 1024 * 256 * 256);
bench("3D 128x64x16 @ 128x16x64", r([128, 64, 16]), r([128, 16, 64]), 2 * 128 * 64 * 64 * 16);
bench("3D 128x64x64 @ 128x64x16", r([128, 64, 64]), r([128, 64, 16]), 2 * 128 * 64 * 64 * 16);
bench("3D 32x64x64 @ 32x64x64 (dh64)", r([32, 64, 64]), r([32, 64, 64]), 2 * 32 * 64 * 64 * 64);
bench("4D 32x4x64x16 @ 32x4x16x64", r([32, 4, 64, 16]), r([32, 4, 16, 64]), 2 * 128 * 64 * 64 * 16);
bench("transpose 32x64x4x16 ->0213", r([32, 64, 4, 16]), r([1]), 1, (x) => tf.transpose(x, [0, 2, 1, 3]));
bench("softmax 128x64x64", r([128, 64, 64]), r([1]), 1, (x) => tf.softmax(x));
bench("oneHot+cast 2048x108", tf.tensor1d(Array.from({length:2048},(_,i)=>i%108),"int32"), r([1]), 1, (x) => tf.cast(tf.oneHot(x as tf.Tensor1D, 108),"float32"));
bench("gather 108x64 2048", r([108, 64]), tf.tensor1d(Array.from({length:2048},(_,i)=>i%108),"int32"), 1, (x, y) => tf.gather(x, y));
