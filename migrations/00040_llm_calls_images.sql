-- +goose Up
-- images: how many images an image call (generate_image) delivered, or reserved while it runs
-- (0 for every other model call), which usage prices per image (tools.images.price_per_image).
ALTER TABLE llm_calls ADD COLUMN images INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE llm_calls DROP COLUMN images;
