#pragma once
// JobEnv: what a stage may use besides its job's context.
#include <stop_token>
#include <string>

namespace aotpipe {

class Scheduler;
class StageHooks;

// One per job, alive for the whole job; stages receive it by const reference.
struct JobEnv {
  std::string job_name;
  Scheduler& scheduler;
  // Stop requested: the batch was cancelled or the job ran past its timeout. The pipeline
  // checks it before every stage; a long stage may check it too (or pass it to sleep_for).
  std::stop_token stop_token = {};
  // Instrumentation around every stage; null for none.
  const StageHooks* hooks = nullptr;
};

}  // namespace aotpipe
