# Type stubs of the extension module pagedkv._pagedkv (pybind11). Hashes are 16-byte `bytes`
# (low 64 bits then high 64 bits, little-endian); numpy arrays returned are read-only.
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from pagedkv import EvictionPolicy
from pagedkv import replay as replay

__version__: str

class Error(Exception):
    code: str

class InvalidArgumentError(Error, ValueError): ...
class NotFoundError(Error, KeyError): ...
class ResourceExhaustedError(Error): ...
class FailedPreconditionError(Error): ...
class AlreadyExistsError(Error): ...
class OutOfRangeError(Error, IndexError): ...
class AbortedError(Error): ...
class UnavailableError(Error): ...
class DataLossError(Error): ...
class InternalError(Error): ...
class UnimplementedError(Error, NotImplementedError): ...
class PermissionDeniedError(Error): ...
class UnauthenticatedError(Error): ...
class DeadlineExceededError(Error): ...
class CancelledError(Error): ...
class UnknownError(Error): ...

_Policy = Union[str, EvictionPolicy]
_Listener = Callable[[Union[BlockStored, BlockRemoved, AllBlocksCleared]], Any]
_Event = Union[BlockStored, BlockRemoved, AllBlocksCleared]

class BlockStored:
    hash: bytes
    parent_hash: bytes
    token_ids: List[int]
    token_count: int
    block: int
    def as_dict(self) -> Dict[str, Any]: ...

class BlockRemoved:
    hash: bytes
    block: int
    def as_dict(self) -> Dict[str, Any]: ...

class AllBlocksCleared:
    def as_dict(self) -> Dict[str, Any]: ...

class MultimodalInput:
    offset: int
    length: int
    content_hash: bytes
    def __init__(self, offset: int, length: int, content_hash: bytes) -> None: ...
    def as_dict(self) -> Dict[str, Any]: ...

class CacheRequest:
    def __init__(self, id: int, prompt: Sequence[int], *, block_size: int = 16,
                 cache_salt: str = "", model_fingerprint: str = "", adapter_id: int = 0,
                 multimodal: Optional[List[MultimodalInput]] = None,
                 vocab_size: int = 0) -> None: ...
    def append_tokens(self, tokens: Sequence[int]) -> None: ...
    def append_token(self, token: int) -> None: ...
    def truncate(self, num_tokens: int) -> None: ...
    id: int
    block_size: int
    cache_salt: str
    model_fingerprint: str
    adapter_id: int
    vocab_size: int
    num_tokens: int
    num_prompt_tokens: int
    num_full_blocks: int
    tokens: npt.NDArray[np.int32]
    block_hashes: List[bytes]
    root_hash: bytes
    def __len__(self) -> int: ...

class ComputedBlocks:
    blocks: List[int]
    num_computed_tokens: int
    other_groups: List[List[int]]
    group_blocks: List[List[int]]
    def __init__(self, blocks: Sequence[int] = ..., num_computed_tokens: int = 0,
                 other_groups: Sequence[Sequence[int]] = ...) -> None: ...
    def as_dict(self) -> Dict[str, Any]: ...

class CacheStats:
    lookups: int
    queried_tokens: int
    queried_blocks: int
    hit_tokens: int
    hit_blocks: int
    stored_blocks: int
    evictions: int
    verification_failures: int
    replaced_blocks: int
    resets: int
    promoted_duplicates: int
    hit_rate: float
    block_hit_rate: float
    def summary(self) -> str: ...
    def as_dict(self) -> Dict[str, Any]: ...

class KvCacheManager:
    def __init__(self, *, num_blocks: int, block_size: int = 16,
                 enable_prefix_caching: bool = True, verify_tokens: bool = True,
                 eviction_policy: _Policy = "lru", vocab_size: int = 0,
                 model_fingerprint: str = "", record_events: bool = True,
                 collect_block_metrics: bool = False, enable_priorities: bool = False,
                 max_high_priority_fraction: float = 0.5,
                 groups: Sequence[KvCacheGroupSpec] = ..., collect_event_batches: bool = False,
                 data_parallel_rank: Optional[int] = None) -> None: ...
    def new_request(self, id: int, prompt: Sequence[int], *, cache_salt: str = "",
                    adapter_id: int = 0,
                    multimodal: Optional[List[MultimodalInput]] = None,
                    priority: int = 35, retention_seconds: float = ...,
                    priority_spans: Sequence[Tuple[int, int, int]] = ...) -> CacheRequest: ...
    def get_computed_blocks(self, request: CacheRequest) -> ComputedBlocks: ...
    def allocate_slots(self, request: CacheRequest, num_new_tokens: int,
                       computed: Optional[ComputedBlocks] = None, *,
                       no_cache_from_token: int = -1, num_lookahead_tokens: int = 0) -> None: ...
    def truncate_request(self, request: CacheRequest, num_tokens: int) -> None: ...
    def num_blocks_to_allocate(self, request: CacheRequest, num_new_tokens: int,
                               computed: Optional[ComputedBlocks] = None, *,
                               num_lookahead_tokens: int = 0) -> int: ...
    def free(self, request_id: int) -> None: ...
    def reset_prefix_cache(self) -> None: ...
    def block_table(self, request_id: int, group: int = 0) -> npt.NDArray[np.int32]: ...
    def slot_mapping(self, request_id: int, start: int, stop: int) -> npt.NDArray[np.int64]: ...
    def num_allocated_tokens(self, request_id: int) -> int: ...
    def num_lookahead_tokens(self, request_id: int) -> int: ...
    def write_prometheus(self, *, labels: Dict[str, str] = ...) -> str: ...
    def __contains__(self, request_id: int) -> bool: ...
    num_requests: int
    num_blocks: int
    block_size: int
    num_available_blocks: int
    usage: float
    stats: CacheStats
    def reset_stats(self) -> None: ...
    def validate_invariants(self) -> None: ...
    def take_events(self) -> List[_Event]: ...
    def add_event_listener(self, listener: _Listener) -> int: ...
    def remove_event_listener(self, listener_id: int) -> bool: ...
    num_groups: int
    groups: List[KvCacheGroupSpec]
    def num_held_blocks(self, request_id: int) -> int: ...
    def num_held_layer_blocks(self, request_id: int) -> int: ...
    def plan_allocation(self, request: CacheRequest, num_new_tokens: int,
                        computed: Optional[ComputedBlocks] = None, *,
                        num_lookahead_tokens: int = 0) -> AllocationPlan: ...
    def take_event_batch(self, timestamp: float, *, encoding: str = "vllm") -> bytes: ...

class KvCacheGroupSpec:
    kind: str
    sliding_window: int
    num_layers: int
    def __init__(self, kind: str = "full_attention", sliding_window: int = 0,
                 num_layers: int = 1) -> None: ...
    def as_dict(self) -> Dict[str, Any]: ...

class AllocationPlan:
    per_group: List[int]
    total: int
    released: List[int]
    total_released: int
    def as_dict(self) -> Dict[str, Any]: ...

def eviction_policy_names() -> List[str]: ...
def root_hash(cache_salt: str = "", model_fingerprint: str = "") -> bytes: ...
def hash_block(parent: bytes, tokens: Sequence[int], *, adapter_id: int = 0) -> bytes: ...
def hash_from_u64(id: int) -> bytes: ...
def chunk_key(tokens: Sequence[int], *, cache_salt: str = "", adapter_id: int = 0,
              rope_fingerprint: str = "", model_fingerprint: str = "") -> bytes: ...

class BlockPool:
    def __init__(self, *, num_blocks: int, block_size: int = 16, store_tokens: bool = True,
                 eviction_policy: _Policy = "lru", record_events: bool = False) -> None: ...
    def find_cached(self, hash: bytes) -> Optional[int]: ...
    def tokens_match(self, block: int, tokens: Sequence[int]) -> bool: ...
    def ref_count(self, block: int) -> int: ...
    def is_cached(self, block: int) -> bool: ...
    def cached_hash(self, block: int) -> Optional[bytes]: ...
    def parent_hash(self, block: int) -> Optional[bytes]: ...
    def cached_tokens(self, block: int) -> List[int]: ...
    def generation(self, block: int) -> int: ...
    def is_linked_to(self, child: int, parent: Optional[int]) -> bool: ...
    def pin(self, block: int) -> None: ...
    def unpin(self, blocks: Union[int, Sequence[int]]) -> None: ...
    def allocate(self, count: Optional[int] = ...) -> Any: ...  # int, or List[int] for a count
    def insert(self, block: int, hash: bytes, parent_hash: bytes, *,
               tokens: Optional[Sequence[int]] = None, parent_block: Optional[int] = None,
               extra_digest: Optional[bytes] = None) -> bool: ...
    def uncache(self, block: int) -> None: ...
    def reset_prefix_cache(self) -> None: ...
    num_blocks: int
    block_size: int
    store_tokens: bool
    num_free_blocks: int
    num_evictable_blocks: int
    num_available_blocks: int
    num_used_blocks: int
    num_cached_blocks: int
    policy_name: str
    stats: CacheStats
    def reset_stats(self) -> None: ...
    def validate_invariants(self) -> None: ...
    def take_events(self) -> List[_Event]: ...
    def add_event_listener(self, listener: _Listener) -> int: ...
    def remove_event_listener(self, listener_id: int) -> bool: ...

class ChunkLocation:
    key: bytes
    blocks: List[int]
    start_offset: int
    num_tokens: int
    position: int
    def slot_of(self, i: int, block_size: int) -> int: ...
    def position_of(self, i: int) -> int: ...
    def as_dict(self) -> Dict[str, Any]: ...

class ChunkIndexStats:
    lookups: int
    hits: int
    hit_tokens: int
    inserts: int
    invalidations: int
    orphans_freed: int
    def as_dict(self) -> Dict[str, Any]: ...

class ChunkIndex:
    def __init__(self, pool: BlockPool, *, verify_tokens: bool = True) -> None: ...
    def insert(self, key: bytes, tokens: Sequence[int], position: int, blocks: Sequence[int],
               start_offset: int = 0) -> bool: ...
    def find(self, key: bytes, tokens: Sequence[int]) -> Optional[ChunkLocation]: ...
    def acquire(self, location: ChunkLocation) -> None: ...
    def release(self, location: ChunkLocation) -> None: ...
    def pinned(self, location: ChunkLocation) -> Any: ...  # a context manager (__init__.py)
    def erase(self, key: bytes) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: bytes) -> bool: ...
    def num_chunks_using(self, block: int) -> int: ...
    stats: ChunkIndexStats
    pool: BlockPool
    def validate_invariants(self) -> None: ...

class ScheduledSequence:
    request_id: int
    query_start: int
    num_scheduled_tokens: int
    num_computed_tokens: int
    block_table_start: int
    num_blocks: int
    samples: bool
    newly_admitted: bool
    num_prefix_hit_tokens: int
    num_shifted_hit_tokens: int
    num_blend_tokens: int
    num_draft_tokens: int
    num_copied_tokens: int
    seq_len: int
    def as_dict(self) -> Dict[str, Any]: ...

class BlockCopy:
    src: int
    dst: int
    def as_dict(self) -> Dict[str, Any]: ...

class KvSlotMove:
    src_slot: int
    dst_slot: int
    old_position: int
    new_position: int
    def as_dict(self) -> Dict[str, Any]: ...

class SchedulerStepStats:
    step: int
    num_scheduled_tokens: int
    num_prefill_tokens: int
    num_decode_tokens: int
    num_scheduled_seqs: int
    num_running: int
    num_waiting: int
    num_newly_admitted: int
    num_preempted: int
    num_finished: int
    num_prefix_hit_tokens: int
    num_admitted_prompt_tokens: int
    num_shifted_hit_tokens: int
    num_blend_tokens: int
    num_draft_tokens: int
    num_copied_tokens: int
    num_used_blocks: int
    num_total_blocks: int
    def as_dict(self) -> Dict[str, Any]: ...

class ScheduledBatch:
    token_ids: npt.NDArray[np.int32]
    positions: npt.NDArray[np.int32]
    slot_mapping: npt.NDArray[np.int64]
    query_start_loc: npt.NDArray[np.int32]
    block_table_ids: npt.NDArray[np.int32]
    block_table_start: npt.NDArray[np.int32]
    def block_table(self, i: int) -> npt.NDArray[np.int32]: ...
    sequences: List[ScheduledSequence]
    finished_request_ids: List[int]
    preempted_request_ids: List[int]
    slot_moves: List[KvSlotMove]
    group_slot_moves: List[List[KvSlotMove]]
    block_copies: List[BlockCopy]
    block_size: int
    stats: SchedulerStepStats
    num_sequences: int
    num_tokens: int
    empty: bool
    def __len__(self) -> int: ...

class RequestOutput:
    request_id: int
    token: int
    num_output_tokens: int
    finish_reason: str  # "none", "stop", "length", "aborted"
    output_tokens: List[int]
    new_tokens: List[int]
    finished: bool
    def as_dict(self) -> Dict[str, Any]: ...

class RequestInfo:
    id: int
    status: str  # "waiting" or "running"
    num_prompt_tokens: int
    num_output_tokens: int
    num_computed_tokens: int
    num_prefix_hit_tokens: int
    num_preemptions: int
    def as_dict(self) -> Dict[str, Any]: ...

class SchedulerStats:
    num_steps: int
    num_scheduled_tokens: int
    num_preemptions: int
    num_finished: int
    num_aborted: int
    num_admissions: int
    num_admitted_tokens: int
    num_prefix_hit_tokens: int
    num_shifted_hit_tokens: int
    num_draft_tokens: int
    num_accepted_draft_tokens: int
    num_copied_tokens: int
    def as_dict(self) -> Dict[str, Any]: ...

class Scheduler:
    def __init__(self, cache: KvCacheManager, *, max_num_batched_tokens: int = 2048,
                 max_num_seqs: int = 256, enable_chunked_prefill: bool = True,
                 long_prefill_token_threshold: int = 0, policy: str = "fcfs",
                 cache_aware: bool = False, cache_aware_max_waiting: int = 256,
                 max_model_len: int = 0, emit_block_tables: bool = True) -> None: ...
    def add_request(self, id: int, prompt: Sequence[int], *, max_new_tokens: int = 16,
                    priority: int = 0, arrival_time: float = 0.0, cache_salt: str = "",
                    adapter_id: int = 0, multimodal: Optional[List[MultimodalInput]] = None,
                    eos_token: Optional[int] = None, stop_tokens: Sequence[int] = ...,
                    chunks: Optional[List[Tuple[int, int]]] = None,
                    prompt_source: int = 0) -> None: ...
    def schedule(self) -> ScheduledBatch: ...
    def update_from_output(
        self, sampled: Union[Dict[int, int], Iterable[Tuple[int, int]],
                             Iterable[Tuple[int, int, int]]]) -> List[RequestOutput]: ...
    def set_draft_tokens(self, request_id: int, draft_tokens: Sequence[int]) -> None: ...
    def abort_request(self, request_id: int) -> None: ...
    def has_unfinished_requests(self) -> bool: ...
    num_waiting: int
    num_running: int
    def get_request_info(self, request_id: int) -> RequestInfo: ...
    stats: SchedulerStats
    cache: KvCacheManager

class Tokenizer:
    @staticmethod
    def load(path: str, vocab_size: int) -> Tokenizer: ...
    @staticmethod
    def load_huggingface(path: str) -> Tokenizer: ...
    def encode(self, text: str, *, add_bos: bool = True, add_eos: bool = False) -> List[int]: ...
    def decode(self, tokens: Sequence[int], *, prev: int = 1) -> str: ...
    vocab_size: int
    bos_id: int
    eos_id: int

class GgufFile:
    def __init__(self, path: str) -> None: ...
    def tensor_names(self) -> List[str]: ...
    def tensor_type(self, name: str) -> int: ...
    def read_tensor(self, name: str) -> npt.NDArray[np.float32]: ...
    def tokenizer(self) -> Tokenizer: ...
    version: int
    path: str

def format_chat_prompt(chat_template: str, user_message: str) -> str: ...
def read_chat_template(model_path: str) -> str: ...

class GenerationRequest:
    def __init__(self, *, prompt_tokens: Sequence[int] = ..., prompt_text: str = "",
                 max_new_tokens: int = 16, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int = 0, cache_salt: str = "", priority: int = 0,
                 stop_at_eos: bool = True, stop_tokens: Sequence[int] = ...,
                 chunks: Sequence[Tuple[int, int]] = ..., cache_priority: int = 35,
                 cache_priority_spans: Sequence[Tuple[int, int, int]] = ...,
                 logprobs: int = -1, prompt_logprobs: int = -1, top_k: int = 0,
                 min_p: float = 0.0, repetition_penalty: float = 1.0,
                 presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 logit_bias: Dict[int, float] = ..., min_tokens: int = 0) -> None: ...
    prompt_tokens: List[int]
    prompt_text: str
    max_new_tokens: int
    cache_salt: str
    priority: int
    prompt_source: int
    def as_dict(self) -> Dict[str, Any]: ...

class TokenOutput:
    request_id: int
    token: int
    index: int
    logprobs: Optional[Tuple[float, List[Tuple[int, float]]]]
    prompt_logprobs: Optional[List[Tuple[float, List[Tuple[int, float]]]]]
    def as_dict(self) -> Dict[str, Any]: ...

class GenerationResult:
    request_id: int
    prompt_tokens: List[int]
    output_tokens: List[int]
    finish_reason: str
    text: str
    prompt_logprobs: List[Tuple[float, List[Tuple[int, float]]]]
    num_prefix_hit_tokens: int
    num_device_hit_tokens: int
    num_host_hit_tokens: int
    num_remote_hit_tokens: int
    num_shifted_hit_tokens: int
    num_preemptions: int
    num_readmission_hit_tokens: int
    num_readmission_device_hit_tokens: int
    num_readmission_host_hit_tokens: int
    num_readmission_remote_hit_tokens: int
    num_disk_hit_tokens: int
    num_readmission_disk_hit_tokens: int
    time_to_first_token_s: float
    latency_s: float
    def as_dict(self) -> Dict[str, Any]: ...

class StepOutput:
    tokens: List[TokenOutput]
    finished: List[GenerationResult]
    logits: Optional[npt.NDArray[np.float32]]
    batch: SchedulerStepStats
    seconds: float

class EngineStats:
    num_steps: int
    num_requests: int
    num_finished: int
    num_prompt_tokens: int
    num_prefix_hit_tokens: int
    num_computed_tokens: int
    num_generated_tokens: int
    num_preemptions: int
    num_host_hit_tokens: int
    num_remote_hit_tokens: int
    num_disk_hit_tokens: int
    num_readmissions: int
    num_readmission_tokens: int
    num_readmission_hit_tokens: int
    num_readmission_host_hit_tokens: int
    num_readmission_remote_hit_tokens: int
    num_draft_tokens: int
    num_accepted_draft_tokens: int
    busy_seconds: float
    step_num_tokens: List[int]
    step_num_seqs: List[int]
    num_shifted_hit_tokens: int
    num_blend_recomputed_tokens: int
    num_blend_partial_tokens: int
    num_float_key_moves: int
    max_step_num_tokens: int
    max_step_num_seqs: int
    step_num_tokens_histogram: List[int]
    def as_dict(self) -> Dict[str, Any]: ...

class ChunkReuseOptions:
    mode: str
    first_k: int
    recompute_fraction: float
    deviation_layer: int
    float_keys_memory: int
    def __init__(self, *, mode: str = "rerotate", first_k: int = 0,
                 recompute_fraction: float = 0.0, deviation_layer: int = 1,
                 float_keys_memory: int = 0) -> None: ...

class Engine:
    @staticmethod
    def load(model_path: str, tokenizer_path: str = "", *, backend: str = "auto",
             num_threads: int = 0, block_size: int = 16, num_kv_blocks: int = 0, kv_dtype: str = "f32",
             enable_prefix_caching: bool = True, eviction_policy: str = "lru",
             max_num_batched_tokens: int = 2048, max_num_seqs: int = 256,
             enable_chunked_prefill: bool = True, allow_context_overrun: bool = False,
             return_logits: bool = False, model_id: str = "llama2c",
             num_speculative_tokens: int = 0, collect_block_metrics: bool = False,
             enable_cache_priorities: bool = False, weights: str = "native",
             kv_cache_memory: int = 0, hybrid_kv_cache: str = "auto",
             activations: str = "int8", int8_kernel: str = "",
             kv_cache_dtype: str = "", disk_cache: str = "",
             disk_cache_size: int = 10737418240, kv_cache_dtype_v: str = "",
             disk_cache_read_threads: int = 2,
             chunk_reuse: Optional[ChunkReuseOptions] = None) -> Engine: ...
    def add_request(self, request: Optional[GenerationRequest] = None, **kwargs: Any) -> int: ...
    def step(self) -> StepOutput: ...
    def generate(self, requests: Sequence[GenerationRequest]) -> List[GenerationResult]: ...
    def stream(self, requests: Optional[Sequence[GenerationRequest]] = None
               ) -> Iterator[TokenOutput]: ...
    def abort_request(self, request_id: int) -> None: ...
    def has_unfinished_requests(self) -> bool: ...
    context_length: int
    backend_name: str
    kv_cache_layout: Dict[str, Any]
    kv_pool: Dict[str, Any]
    stats: EngineStats
    tier_stats: Dict[str, Dict[str, int]]
    def write_prometheus(self, *, labels: Dict[str, str] = ...) -> str: ...
    vocab_size: int
    model_config: str
    tokenizer: Optional[Tokenizer]
