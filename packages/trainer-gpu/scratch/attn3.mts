import { selectBackend, tf } from "/work/main/packages/trainer-gpu/src/index.ts";
await selectBackend({ log: () => {} });
function bench(name: string, f: () => tf.Tensor) {
  for (let i = 0; i < 2; i++) f().dispose();
  let best = 1e9;
  for (let i = 0; i < 12; i++) { const t0 = performance.now(); const c = f(); c.dataSync(); c.dispose(); best = Math.min(best, performance.now() - t0); }
  console.log(name.padEnd(40), best.toFixed(2), "ms");
}
const P = tf.randomNormal([128, 64, 64]), PT = tf.randomNormal([128, 64, 64]);
const v = tf.randomNormal([128, 64, 16]), vT = tf.randomNormal([128, 16, 64]);
for (let r = 0; r < 2; r++) {
bench("NN P[64x64] @ v[64x16]", () => tf.matMul(P as tf.Tensor3D, v as tf.Tensor3D));
bench("NT P @ vT^T", () => tf.matMul(P as tf.Tensor3D, vT as tf.Tensor3D, false, true));
bench("TN PT^T @ v", () => tf.matMul(PT as tf.Tensor3D, v as tf.Tensor3D, true, false));
bench("out^T: vT[16x64] @ P^T via NT", () => tf.matMul(vT as tf.Tensor3D, P as tf.Tensor3D, false, true));
bench("out^T: vT @ PT (NN)", () => tf.matMul(vT as tf.Tensor3D, PT as tf.Tensor3D));
bench("q@kT NN [64x16]@[16x64]", () => tf.matMul(v as tf.Tensor3D, vT as tf.Tensor3D));
bench("q@k^T NT", () => tf.matMul(v as tf.Tensor3D, v as tf.Tensor3D, false, true));
bench("transpose 128x64x64", () => tf.transpose(P, [0, 2, 1]));
bench("transpose 128x64x16", () => tf.transpose(v, [0, 2, 1]));
}
