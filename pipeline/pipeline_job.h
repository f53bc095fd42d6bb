#pragma once
// A batch job that runs a pipeline on one context and returns the context.
#include <aotpipe/pipeline/batch.h>
#include <aotpipe/pipeline/pipeline.h>

#include <memory>

namespace aotpipe {
namespace detail {
template <typename Context>
Task<Context> run_pipeline_on(std::shared_ptr<const Pipeline<Context>> pipeline, Context context, const JobEnv& env) {
  co_await pipeline->run(context, env);
  co_return context;
}
}  // namespace detail

// The pipeline is shared by every job made from it; the context is moved into the job (it need
// not be copyable).
template <typename Context>
BatchJob<Context> make_pipeline_job(std::string name, std::shared_ptr<const Pipeline<Context>> pipeline,
                                    Context context) {
  auto owned_context = std::make_shared<Context>(std::move(context));
  return BatchJob<Context>{.name = std::move(name),
                           .run = [pipeline = std::move(pipeline), owned_context](const JobEnv& env) {
                             return detail::run_pipeline_on(pipeline, std::move(*owned_context), env);
                           }};
}

}  // namespace aotpipe
