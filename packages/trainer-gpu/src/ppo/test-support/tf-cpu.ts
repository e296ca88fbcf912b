// Test-only: the CPU backend with gradients registered, enough for tiny tensors.
import "@tensorflow/tfjs-backend-cpu";
import "@tensorflow/tfjs-core/dist/register_all_gradients";
import * as tf from "@tensorflow/tfjs-core";

export async function useCpuBackend(): Promise<typeof tf> {
  await tf.setBackend("cpu");
  await tf.ready();
  return tf;
}
