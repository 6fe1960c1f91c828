"""The 32 prompts of the KV dtype quality scripts (kv_dtype_quality.py, kv_dtype_vs_llamacpp.py)."""

# 32 short English openings (plain text, no chat template), the same for every model.
PROMPTS = [
    "Once upon a time", "The capital of France is", "In the morning, the little dog",
    "Water boils at", "The best way to learn a language is", "My favourite book is",
    "Tom and Lily went to the park", "The sun is a star that", "Here is a recipe for pancakes:",
    "A computer program is", "The history of Rome begins", "She opened the door and saw",
    "Photosynthesis is the process", "The three primary colours are", "Yesterday it rained, so",
    "The old man sat by the sea", "To make a paper plane, first", "Mathematics is the study of",
    "The cat climbed the tree because", "In 1969, astronauts", "A good friend is someone who",
    "The train left the station at", "Bees make honey by", "The biggest animal on Earth is",
    "Once there was a small robot", "The recipe needs two eggs and", "Music can make people",
    "The forest was dark and", "Every morning, Anna", "The moon goes around the Earth",
    "A triangle has three", "The children built a sandcastle",
]
